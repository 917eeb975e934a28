-- arq's finish_job for several messages, plus their slots and lanes. KEYS[1] the queue; ARGV[1] the wake
-- channel, ARGV[2] the finishing worker's delivery token, then per message: arq id, finish (1/0), result data
-- ('' none), result px ('' forever), incr score ('' none), keep in progress ms ('' delete it). A message run
-- again (or `again`) goes back to its lane; one dropped while it ran (a worker declared lost, still alive)
-- finds nothing to put back or take away. A finish whose delivery no longer holds the message (its in-progress
-- key is gone, flushed, or another worker's: a zombie after a flush or a rebuild) does nothing at all: the
-- sweep and the reconciliation settle what it leaves.
local wake = false
local token = ARGV[2]
for i = 3, #ARGV, 6 do
  local arq_id = ARGV[i]
  local job_id = job_of(arq_id)
  local in_progress, keep_ms = 'arq:in-progress:' .. arq_id, ARGV[i + 5]
  if redis.call('get', in_progress) == token then
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
end
if wake then redis.call('publish', ARGV[1], '1') end
return 1
