-- The dead-letter consumer's queue has no lanes: it is claimed in time order, as arq does.
-- KEYS[1] the queue; ARGV: now (ms), how many queue entries to look at, free slots, the in-progress timeout
-- (ms), '1' to take abort requests, the worker's delivery token (see claim.lua). Returns the claimed messages (CLAIMED_FIELDS values each) and the queue's
-- head with its score, for the wake-up timer. Like arq's WATCH/MULTI, a job whose in-progress key exists is
-- skipped.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local slots = tonumber(ARGV[3])
local claimed = {}
for i = 1, #due, 2 do
  if #claimed >= CLAIMED_FIELDS * slots then break end
  local key = 'arq:in-progress:' .. due[i]
  if redis.call('EXISTS', key) == 0 then
    redis.call('PSETEX', key, ARGV[4], ARGV[6] or '1')
    claimed_message(claimed, due[i], due[i + 1], ARGV[5] == '1')
  end
end
return {claimed, redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')}
