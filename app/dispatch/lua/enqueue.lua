-- arq's enqueue plus its lane, one message per job whatever its arq id (a rescue's or wake-up's has a suffix);
-- a job whose message is running gets it once more when it ends without running again (`again`). KEYS[1] the
-- queue; ARGV[1] the wake channel, then per message: expiry (ms; 0: none), message, score, arq id, lane.
-- Returns per message {1 if queued (or the job's message put back in its lane), 0 if the job has its message}
-- and {why it would not start now (see `why`)}.
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
