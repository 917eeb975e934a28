-- KEYS[1] the queue; ARGV: now (ms), free slots, in-progress timeout (ms), '1' to take abort requests, and the
-- claiming worker's delivery token (the in-progress key's value: only its holder's finish acts on a message).
-- Returns {claimed, the earliest future due time seen (ms, or -1)}, or {'rebuild'} while the state is not
-- rebuilt; `claimed` holds CLAIMED_FIELDS values a message (see `claimed_message`).
if redis.call('exists', P .. 'ready') == 0 then return {'rebuild'} end
local now, slots, lease_ms, aborts = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local token = ARGV[5] or '1'
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
      redis.call('psetex', in_progress, lease_ms, token)
      if not claim then
        run_type[r] = redis.call('hincrby', P .. 'run:type', r, 1)
        run_tenant[t] = redis.call('hincrby', P .. 'run:tenant', t, 1)
      end
      -- A new slot, or the one rebuilt for this job after a flush (already counted): this message holds it.
      -- Its claim time is set on every claim, so a sweep that looked before this claim leaves the slot.
      if holder ~= arq_id then
        redis.call('hset', P .. 'claims', job_id, arq_id .. '\t' .. t .. '\t' .. r)
      end
      redis.call('zadd', P .. 'claimed_at', now, job_id)
      if redis.call('zscore', P .. 'tenants:' .. p, t) then
        redis.call('zincrby', P .. 'tenants:' .. p, 1 / (weight[t] or 1), t)
      end
      claimed_message(claimed, arq_id, score, aborts)
    end
  end
  -- else another worker holds it: its finish puts it back in its lane if it is to run again
end
return {claimed, tostring(next_due)}
