-- Once an attempt has started in MySQL: make sure its job holds its slot and this worker its delivery. A
-- Redis flush between the claim and the start took both, and the rebuild that followed may have read MySQL
-- before the start (no slot for the job). ARGV: arq id, the worker's delivery token, tenant, report type,
-- in-progress lease (ms), now (ms). Returns 'ok' (held already, or the job's slot taken over, or a free one
-- counted), 'over' (no slot held and a cap is full: the attempt must not run), or 'rebuild' (not rebuilt yet:
-- rebuild and ask again; that rebuild reads MySQL after the start, so it holds the job's slot).
if redis.call('exists', P .. 'ready') == 0 then return 'rebuild' end
local arq_id, token, tenant, rtype, lease_ms, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local job_id = job_of(arq_id)
local in_progress = 'arq:in-progress:' .. arq_id
local claim = redis.call('hget', P .. 'claims', job_id)
if claim then
  local holder, t, r = split3(claim)
  if holder == arq_id and redis.call('get', in_progress) == token then return 'ok' end
  -- The job's slot, held by a rebuild ('*') or by a message the reconciliation queued after the flush and
  -- another worker claimed: MySQL says this attempt runs, so the slot is its own; the other's end finds
  -- neither the slot nor (same arq id) the delivery.
  redis.call('hset', P .. 'claims', job_id, arq_id .. '\t' .. t .. '\t' .. r)
else
  if full_cap(tenant, rtype) ~= '' then return 'over' end
  redis.call('hincrby', P .. 'run:type', rtype, 1)
  redis.call('hincrby', P .. 'run:tenant', tenant, 1)
  redis.call('hset', P .. 'claims', job_id, arq_id .. '\t' .. tenant .. '\t' .. rtype)
end
redis.call('zadd', P .. 'claimed_at', now, job_id)
redis.call('psetex', in_progress, lease_ms, token)
return 'ok'
