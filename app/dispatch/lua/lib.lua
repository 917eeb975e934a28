-- Shared Lua: key names, joining a lane, dropping empty lanes, a job's one message, releasing a claim.
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
-- The cap one more job of this tenant and type would go over: '' (none), or "cap\tKIND\tNAME\tLIMIT".
local function full_cap(tenant, rtype)
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
-- Why a job of this tenant and type would not start now, whatever its place in line: '' (nothing), or
-- "paused\tKIND\tNAME", or a full cap (see `full_cap`; KIND: tenant | report_type).
local function why(tenant, rtype)
  if redis.call('sismember', P .. 'paused', 'tenant\t' .. tenant) == 1 then
    return 'paused\ttenant\t' .. tenant
  end
  if redis.call('sismember', P .. 'paused', 'type\t' .. rtype) == 1 then
    return 'paused\treport_type\t' .. rtype
  end
  return full_cap(tenant, rtype)
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
  redis.call('hdel', P .. 'attempt', job_id)
  local of_type = uncount(P .. 'run:type', rtype)
  local of_tenant = uncount(P .. 'run:tenant', tenant)
  local type_cap = tonumber(redis.call('hget', P .. 'cap:type', rtype) or '0')
  if type_cap > 0 and of_type >= type_cap then return 1 end
  local tenant_cap = tenant_cap_of(tenant)
  if tenant_cap > 0 and of_tenant >= tenant_cap then return 1 end
  return 0
end
