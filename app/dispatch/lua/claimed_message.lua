-- What a claim hands back per message (CLAIMED_FIELDS values): id, score, body, try count, aborted.
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
