-- Once attempts have started in MySQL: make sure each job holds its slot and its worker its delivery. A
-- Redis flush between the claim and the start took both, and the rebuild that followed may have read MySQL
-- before the start (no slot for the job). One call checks a whole start batch of a worker (group commit).
-- ARGV: now (ms), then per started attempt: arq id, the worker's delivery token, tenant, report type,
-- in-progress lease (ms), the attempt (`attempt_code`). Returns 'rebuild' for the whole batch (not rebuilt
-- yet: rebuild and ask again; that rebuild reads MySQL after the starts, so it holds the jobs' slots), or one
-- answer per attempt, in order: 'ok' (held already, or the job's slot taken over, or a free one counted; the
-- slot's claim time is set, so a sweep that looked before this leaves it), 'over' (no slot held and a cap is
-- full: the attempt must not run), 'superseded' (a later attempt holds the slot, or this one was declared
-- over: it must not run). The batch's attempts are checked in order, as that many calls would.
-- The fence: `attempt` HASH job id -> the attempt holding its slot (set here and by the rebuild, gone with
-- the slot); `over:{job}` the highest attempt the stuck scan declared over (release.lua). A start of a lower
-- attempt (a worker that stalled past its attempt, still alive) never takes a later attempt's slot.
if redis.call('exists', P .. 'ready') == 0 then return 'rebuild' end
local now = ARGV[1]

local function hold(arq_id, token, tenant, rtype, lease_ms, mine)
  local job_id = job_of(arq_id)
  if mine <= tonumber(redis.call('get', P .. 'over:' .. job_id) or '-1') then return 'superseded' end
  local in_progress = 'arq:in-progress:' .. arq_id
  local claim = redis.call('hget', P .. 'claims', job_id)
  if claim then
    if tonumber(redis.call('hget', P .. 'attempt', job_id) or '-1') > mine then return 'superseded' end
    local holder, t, r = split3(claim)
    -- The job's slot, held by this delivery's claim, by a rebuild ('*'), or by a message the reconciliation
    -- queued after a flush that another worker claimed: MySQL says this attempt runs, so the slot is its
    -- own; the other's end finds neither the slot nor (same arq id) the delivery.
    if holder ~= arq_id then redis.call('hset', P .. 'claims', job_id, arq_id .. '\t' .. t .. '\t' .. r) end
  else
    if full_cap(tenant, rtype) ~= '' then return 'over' end
    redis.call('hincrby', P .. 'run:type', rtype, 1)
    redis.call('hincrby', P .. 'run:tenant', tenant, 1)
    redis.call('hset', P .. 'claims', job_id, arq_id .. '\t' .. tenant .. '\t' .. rtype)
  end
  redis.call('hset', P .. 'attempt', job_id, mine)
  redis.call('zadd', P .. 'claimed_at', now, job_id)
  if redis.call('get', in_progress) ~= token then redis.call('psetex', in_progress, lease_ms, token) end
  return 'ok'
end

local answers = {}
for i = 2, #ARGV, 6 do
  answers[#answers + 1] = hold(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], tonumber(ARGV[i + 5]))
end
return answers
