"""The dispatch lanes' Lua scripts (enqueue, claim, finish, release, policy, rebuild, explain): one
library of shared functions and each script's body. Keys and their meaning: app/core/lanes.py.
"""

from __future__ import annotations

# What every claim script hands back for a claimed message, so the worker starts it without arq's own round
# trip for it (workers/running.py): its id, its score, its body ('' once expired), arq's try count (counted
# here, as arq's run_job would) and whether an abort was asked for before it started (when `aborts`).
CLAIMED_FIELDS = 5
RETRY_KEY_TTL_S = 88400  # how long arq keeps a message's try count (arq.worker.Worker.run_job's own figure)
CLAIMED_MESSAGE_LUA = (
    f"local CLAIMED_FIELDS, RETRY_KEY_TTL_S = {CLAIMED_FIELDS}, {RETRY_KEY_TTL_S}\n"
    + r"""
local function claimed_message(out, arq_id, score, aborts)
  local tries = 'arq:retry:' .. arq_id
  local try = redis.call('incr', tries)
  redis.call('expire', tries, RETRY_KEY_TTL_S)
  local aborted = 0
  if aborts and redis.call('zrem', 'arq:abort', arq_id) == 1 then aborted = 1 end
  out[#out + 1] = arq_id
  out[#out + 1] = tostring(score)
  out[#out + 1] = redis.call('get', 'arq:job:' .. arq_id) or ''
  out[#out + 1] = try
  out[#out + 1] = aborted
end
"""
)

# Shared Lua: key names, joining a lane, dropping empty lanes, a job's one message, releasing a claim.
_LIB = r"""
local P = 'ro:d:'
local function lane_key(lane) return P .. 'lane:' .. lane end
local function job_of(arq_id) return string.match(arq_id, '^[^:]+') end
local function split3(s)
  local a, b, c = string.match(s, '^([^\t]*)\t([^\t]*)\t(.*)$')
  return a, b, c
end
local function join_lane(arq_id, score, lane)
  local p, tenant, rtype = split3(lane)
  redis.call('zadd', lane_key(lane), score, arq_id)
  redis.call('hset', P .. 'meta', arq_id, lane)
  redis.call('sadd', P .. 'types:' .. p .. '\t' .. tenant, rtype)
  local tz = P .. 'tenants:' .. p
  if not redis.call('zscore', tz, tenant) then
    -- A tenant joins at the current virtual time (the lowest pass waiting): no credit banked while away.
    local low = redis.call('zrange', tz, 0, 0, 'WITHSCORES')
    local pass = 0
    if #low > 0 then pass = tonumber(low[2]) end
    redis.call('zadd', tz, pass, tenant)
    redis.call('zadd', P .. 'prios', tonumber(p), p)
  end
end
local function drop_if_empty(p, tenant, rtype)
  if redis.call('exists', lane_key(p .. '\t' .. tenant .. '\t' .. rtype)) == 1 then return end
  local tk = P .. 'types:' .. p .. '\t' .. tenant
  redis.call('srem', tk, rtype)
  if redis.call('scard', tk) == 0 then
    redis.call('zrem', P .. 'tenants:' .. p, tenant)
    if redis.call('zcard', P .. 'tenants:' .. p) == 0 then redis.call('zrem', P .. 'prios', p) end
  end
end
local function leave_lane(arq_id)
  local lane = redis.call('hget', P .. 'meta', arq_id)
  if not lane then return end
  if redis.call('zrem', lane_key(lane), arq_id) == 1 then
    local p, tenant, rtype = split3(lane)
    drop_if_empty(p, tenant, rtype)
  end
end
-- A job's one message (`msg`) and its `again` mark go with the message.
local function forget(job_id, arq_id)
  if redis.call('hget', P .. 'msg', job_id) == arq_id then
    redis.call('hdel', P .. 'msg', job_id)
    redis.call('srem', P .. 'again', job_id)
  end
end
local function drop_message(queue, arq_id)
  leave_lane(arq_id)
  redis.call('hdel', P .. 'meta', arq_id)
  redis.call('del', 'arq:job:' .. arq_id, 'arq:in-progress:' .. arq_id, 'arq:retry:' .. arq_id)
  redis.call('zrem', queue, arq_id)
  forget(job_of(arq_id), arq_id)
end
-- One slot fewer held in `hash` for `name`; returns how many were held before.
local function uncount(hash, name)
  local left = redis.call('hincrby', hash, name, -1)
  if left <= 0 then redis.call('hdel', hash, name) end
  return left + 1
end
local function tenant_cap_of(tenant)
  local cap = redis.call('hget', P .. 'cap:tenant', tenant) or redis.call('get', P .. 'cap:tenant_default')
  return tonumber(cap or '0')
end
-- Why a job of this tenant and type would not start now, whatever its place in line: '' (nothing), or
-- "paused\tKIND\tNAME", or "cap\tKIND\tNAME\tLIMIT" (KIND: tenant | report_type).
local function why(tenant, rtype)
  if redis.call('sismember', P .. 'paused', 'tenant\t' .. tenant) == 1 then
    return 'paused\ttenant\t' .. tenant
  end
  if redis.call('sismember', P .. 'paused', 'type\t' .. rtype) == 1 then
    return 'paused\treport_type\t' .. rtype
  end
  local cap = tonumber(redis.call('hget', P .. 'cap:type', rtype) or '0')
  if cap > 0 and tonumber(redis.call('hget', P .. 'run:type', rtype) or '0') >= cap then
    return 'cap\treport_type\t' .. rtype .. '\t' .. cap
  end
  cap = tenant_cap_of(tenant)
  if cap > 0 and tonumber(redis.call('hget', P .. 'run:tenant', tenant) or '0') >= cap then
    return 'cap\ttenant\t' .. tenant .. '\t' .. cap
  end
  return ''
end
-- Free the slot `job_id` holds if message `arq_id` holds it (any message when arq_id is ''). Returns
-- 1 when the slot freed one under a cap that was full (jobs may be waiting for it: wake the workers),
-- 0 otherwise, -1 when nothing was held.
local function release(job_id, arq_id)
  local claim = redis.call('hget', P .. 'claims', job_id)
  if not claim then return -1 end
  local holder, tenant, rtype = split3(claim)
  if arq_id ~= '' and holder ~= arq_id and holder ~= '*' then return -1 end
  redis.call('hdel', P .. 'claims', job_id)
  redis.call('zrem', P .. 'claimed_at', job_id)
  local of_type = uncount(P .. 'run:type', rtype)
  local of_tenant = uncount(P .. 'run:tenant', tenant)
  local type_cap = tonumber(redis.call('hget', P .. 'cap:type', rtype) or '0')
  if type_cap > 0 and of_type >= type_cap then return 1 end
  local tenant_cap = tenant_cap_of(tenant)
  if tenant_cap > 0 and of_tenant >= tenant_cap then return 1 end
  return 0
end
"""

# arq's enqueue plus its lane, one message per job whatever its arq id (a rescue's or wake-up's has a suffix);
# a job whose message is running gets it once more when it ends without running again (`again`). KEYS[1] the
# queue; ARGV[1] the wake channel, then per message: expiry (ms; 0: none), message, score, arq id, lane.
# Returns per message {1 if queued (or the job's message put back in its lane), 0 if the job has its message}
# and {why it would not start now (see `why`)}.
ENQUEUE_LUA = (
    _LIB
    + r"""
local queued, flags, reasons = 0, {}, {}
for i = 2, #ARGV, 5 do
  local arq_id, lane = ARGV[i + 3], ARGV[i + 4]
  local _, tenant, rtype = split3(lane)
  reasons[#reasons + 1] = why(tenant, rtype)
  flags[#flags + 1] = 0
  local job_id = job_of(arq_id)
  local held = redis.call('hget', P .. 'msg', job_id)
  if held and redis.call('exists', 'arq:job:' .. held) == 0 then held = nil end
  -- This very message, untracked (queued by an older release): adopted.
  if not held and redis.call('exists', 'arq:job:' .. arq_id) == 1 then held = arq_id end
  if not held then
    if redis.call('exists', 'arq:result:' .. arq_id) == 0 then
      local job_key = 'arq:job:' .. arq_id
      if tonumber(ARGV[i]) > 0 then redis.call('psetex', job_key, ARGV[i], ARGV[i + 1])
      else redis.call('set', job_key, ARGV[i + 1]) end
      redis.call('zadd', KEYS[1], ARGV[i + 2], arq_id)
      join_lane(arq_id, ARGV[i + 2], lane)
      redis.call('hset', P .. 'msg', job_id, arq_id)
      queued = queued + 1
      flags[#flags] = 1
    end
  else
    redis.call('hset', P .. 'msg', job_id, held)
    if redis.call('exists', 'arq:in-progress:' .. held) == 1 then
      redis.call('sadd', P .. 'again', job_id)
    else
      -- Queued but in no lane and held by nobody (its holder died before it could hand it back): repair.
      local its_lane = redis.call('hget', P .. 'meta', held) or lane
      if not redis.call('zscore', lane_key(its_lane), held) then
        join_lane(held, redis.call('zscore', KEYS[1], held) or ARGV[i + 2], its_lane)
        redis.call('zadd', KEYS[1], 'NX', ARGV[i + 2], held)
        queued = queued + 1
        flags[#flags] = 1
      end
    end
  end
end
if queued > 0 then redis.call('publish', ARGV[1], '1') end
return {flags, reasons}
"""
)

# ARGV: (tenant, report type) pairs. Returns why each would not start now (see `why` above).
EXPLAIN_LUA = (
    _LIB
    + r"""
local out = {}
for i = 1, #ARGV, 2 do out[#out + 1] = why(ARGV[i], ARGV[i + 1]) end
return out
"""
)

# KEYS[1] the queue; ARGV: now (ms), free slots, in-progress timeout (ms), '1' to take abort requests.
# Returns {claimed, the earliest future due time seen (ms, or -1)}, or {'rebuild'} while the state is not
# rebuilt; `claimed` holds CLAIMED_FIELDS values a message (see `claimed_message`).
CLAIM_LUA = (
    _LIB
    + CLAIMED_MESSAGE_LUA
    + r"""
if redis.call('exists', P .. 'ready') == 0 then return {'rebuild'} end
local now, slots, lease_ms, aborts = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local function as_map(flat)
  local m = {}
  for i = 1, #flat, 2 do m[flat[i]] = tonumber(flat[i + 1]) end
  return m
end
local type_cap = as_map(redis.call('hgetall', P .. 'cap:type'))
local tenant_cap = as_map(redis.call('hgetall', P .. 'cap:tenant'))
local weight = as_map(redis.call('hgetall', P .. 'weight'))
local default_cap = tonumber(redis.call('get', P .. 'cap:tenant_default') or '0')
local paused = {}
for _, name in ipairs(redis.call('smembers', P .. 'paused')) do paused[name] = true end
local run_type, run_tenant = {}, {}
local function running(cache, hash, name)
  if cache[name] == nil then cache[name] = tonumber(redis.call('hget', hash, name) or '0') end
  return cache[name]
end
local function tenant_open(t)
  if paused['tenant\t' .. t] then return false end
  local cap = tenant_cap[t] or default_cap
  return cap <= 0 or running(run_tenant, P .. 'run:tenant', t) < cap
end
local function type_open(r)
  if paused['type\t' .. r] then return false end
  local cap = type_cap[r]
  return cap == nil or running(run_type, P .. 'run:type', r) < cap
end
local claimed, next_due = {}, -1
local function note_future(score)
  if score > now and (next_due < 0 or score < next_due) then next_due = score end
end
-- The due head of the best lane of the first open tenant in pass order, highest priority first. Virtual
-- time is the pass of that tenant: a tenant ahead of it with nothing it may start now (deferred, paused,
-- capped) is lifted to it, so it banks no credit while it waits and comes back level, not owed every slot.
local function pick()
  for _, p in ipairs(redis.call('zrevrange', P .. 'prios', 0, -1)) do
    local tz = P .. 'tenants:' .. p
    local ranked = redis.call('zrange', tz, 0, -1, 'WITHSCORES')
    for i = 1, #ranked, 2 do
      local t = ranked[i]
      local best, best_score, best_type
      if tenant_open(t) then
        for _, r in ipairs(redis.call('smembers', P .. 'types:' .. p .. '\t' .. t)) do
          if type_open(r) then
            local head = redis.call('zrange', lane_key(p .. '\t' .. t .. '\t' .. r), 0, 0, 'WITHSCORES')
            if #head == 0 then
              drop_if_empty(p, t, r)
            else
              local score = tonumber(head[2])
              if score > now then
                note_future(score)
              elseif best == nil or score < best_score or (score == best_score and head[1] < best) then
                best, best_score, best_type = head[1], score, r
              end
            end
          end
        end
      end
      if best then
        local pass = ranked[i + 1]
        for j = 1, i - 2, 2 do
          if tonumber(ranked[j + 1]) < tonumber(pass) then redis.call('zadd', tz, 'XX', pass, ranked[j]) end
        end
        return p, t, best_type, best, best_score
      end
    end
  end
  return nil
end
while #claimed < CLAIMED_FIELDS * slots do
  local p, t, r, arq_id, score = pick()
  if not p then break end
  redis.call('zrem', lane_key(p .. '\t' .. t .. '\t' .. r), arq_id)
  drop_if_empty(p, t, r)
  local job_id = job_of(arq_id)
  local in_progress = 'arq:in-progress:' .. arq_id
  if redis.call('exists', 'arq:job:' .. arq_id) == 0 then
    redis.call('hdel', P .. 'meta', arq_id)  -- the message expired: arq would drop it too
    redis.call('zrem', KEYS[1], arq_id)
    forget(job_id, arq_id)
  elseif redis.call('exists', in_progress) == 0 then
    local claim = redis.call('hget', P .. 'claims', job_id)
    local holder = claim and string.match(claim, '^[^\t]*')
    if holder and holder ~= arq_id and holder ~= '*' then
      -- A second message of a job whose slot another message holds goes; the holder carries the job.
      drop_message(KEYS[1], arq_id)
      if redis.call('exists', 'arq:job:' .. holder) == 1 then
        redis.call('hset', P .. 'msg', job_id, holder)
        redis.call('sadd', P .. 'again', job_id)
      end
    else
      redis.call('psetex', in_progress, lease_ms, '1')
      if not claim then
        run_type[r] = redis.call('hincrby', P .. 'run:type', r, 1)
        run_tenant[t] = redis.call('hincrby', P .. 'run:tenant', t, 1)
      end
      -- A new slot, or the one rebuilt for this job after a flush (already counted): this message holds it.
      if holder ~= arq_id then
        redis.call('hset', P .. 'claims', job_id, arq_id .. '\t' .. t .. '\t' .. r)
        redis.call('zadd', P .. 'claimed_at', now, job_id)
      end
      if redis.call('zscore', P .. 'tenants:' .. p, t) then
        redis.call('zincrby', P .. 'tenants:' .. p, 1 / (weight[t] or 1), t)
      end
      claimed_message(claimed, arq_id, score, aborts)
    end
  end
  -- else another worker holds it: its finish puts it back in its lane if it is to run again
end
return {claimed, tostring(next_due)}
"""
)

# arq's finish_job for several messages, plus their slots and lanes. KEYS[1] the queue; ARGV[1] the wake
# channel, then per message: arq id, finish (1/0), result data ('' none), result px ('' forever), incr score
# ('' none), keep in progress ms ('' delete it). A message run again (or `again`) goes back to its lane; one
# dropped while it ran (a worker declared lost, still alive) finds nothing to put back or take away.
FINISH_LUA = (
    _LIB
    + r"""
local wake = false
for i = 2, #ARGV, 6 do
  local arq_id = ARGV[i]
  local job_id = job_of(arq_id)
  local in_progress, keep_ms = 'arq:in-progress:' .. arq_id, ARGV[i + 5]
  if keep_ms == '' then redis.call('del', in_progress) else redis.call('pexpire', in_progress, keep_ms) end
  local tracked = redis.call('hget', P .. 'msg', job_id) == arq_id
  local score = redis.call('exists', 'arq:job:' .. arq_id) == 1 and redis.call('zscore', KEYS[1], arq_id)
  local again = ARGV[i + 1] == '1' and score and tracked and redis.call('srem', P .. 'again', job_id) == 1
  if ARGV[i + 1] == '1' and not again then
    if ARGV[i + 2] ~= '' then
      if ARGV[i + 3] == '' then redis.call('set', 'arq:result:' .. arq_id, ARGV[i + 2])
      else redis.call('set', 'arq:result:' .. arq_id, ARGV[i + 2], 'PX', ARGV[i + 3]) end
    end
    redis.call('del', 'arq:retry:' .. arq_id, 'arq:job:' .. arq_id)
    redis.call('zrem', 'arq:abort', arq_id)
    redis.call('zrem', KEYS[1], arq_id)
    leave_lane(arq_id)
    redis.call('hdel', P .. 'meta', arq_id)
    forget(job_id, arq_id)
  elseif score then
    if ARGV[i + 4] ~= '' and not again then score = redis.call('zincrby', KEYS[1], ARGV[i + 4], arq_id) end
    if tracked then redis.call('srem', P .. 'again', job_id) end  -- it runs again anyway
    local lane = redis.call('hget', P .. 'meta', arq_id)
    if lane then join_lane(arq_id, score, lane) end
    if again or ARGV[i + 4] == '' then wake = true end  -- due now: another worker may take it
  end
  if release(job_id, arq_id) == 1 then wake = true end
end
if wake then redis.call('publish', ARGV[1], '1') end
return 1
"""
)

# Free the slots of jobs that no longer run (declared lost, or a claim MySQL never saw start) and drop the
# message that held each one. ARGV[1] the wake channel, then job ids. KEYS[1] the queue. Returns how many.
RELEASE_LUA = (
    _LIB
    + r"""
local released = 0
for i = 2, #ARGV do
  local claim = redis.call('hget', P .. 'claims', ARGV[i])
  if claim then
    local holder = string.match(claim, '^[^\t]*')
    release(ARGV[i], '')
    released = released + 1
    if holder ~= '*' then drop_message(KEYS[1], holder) end
  end
end
if released > 0 then redis.call('publish', ARGV[1], '1') end
return released
"""
)

# Replace the policy. ARGV: the wake channel, then a flat list of (kind, name, value) triples; kinds
# 'ct' type cap, 'cn' tenant cap, 'cd' default tenant cap, 'w' weight, 'p' paused ("type\tX"/"tenant\tY").
_POLICY_BODY = r"""
local function set_policy(from)
  redis.call('del', P .. 'cap:type', P .. 'cap:tenant', P .. 'cap:tenant_default')
  redis.call('del', P .. 'weight', P .. 'paused')
  for i = from, #ARGV, 3 do
    local kind, name, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if kind == 'ct' then redis.call('hset', P .. 'cap:type', name, value)
    elseif kind == 'cn' then redis.call('hset', P .. 'cap:tenant', name, value)
    elseif kind == 'cd' then redis.call('set', P .. 'cap:tenant_default', value)
    elseif kind == 'w' then redis.call('hset', P .. 'weight', name, value)
    elseif kind == 'p' then redis.call('sadd', P .. 'paused', name) end
  end
end
"""
POLICY_LUA = (
    _LIB
    + _POLICY_BODY
    + r"""
set_policy(2)
redis.call('publish', ARGV[1], '1')
return 1
"""
)

# After a flush: the policy, and a slot for every job MySQL says is running, unless another process
# already rebuilt. ARGV: the wake channel, the number of running jobs N, then N (job id, tenant, type)
# triples, then the policy triples. Returns 1 if this call rebuilt.
REBUILD_LUA = (
    _LIB
    + _POLICY_BODY
    + r"""
if redis.call('exists', P .. 'ready') == 1 then return 0 end
local n = tonumber(ARGV[2])
for i = 3, 2 + 3 * n, 3 do
  if redis.call('hsetnx', P .. 'claims', ARGV[i], '*\t' .. ARGV[i + 1] .. '\t' .. ARGV[i + 2]) == 1 then
    redis.call('zadd', P .. 'claimed_at', 0, ARGV[i])
    redis.call('hincrby', P .. 'run:tenant', ARGV[i + 1], 1)
    redis.call('hincrby', P .. 'run:type', ARGV[i + 2], 1)
  end
end
set_policy(3 + 3 * n)
redis.call('set', P .. 'ready', '1')
redis.call('publish', ARGV[1], '1')
return 1
"""
)
