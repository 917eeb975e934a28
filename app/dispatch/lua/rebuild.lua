-- After a flush: the policy, and a slot for every job MySQL says is running, unless another process
-- already rebuilt. ARGV: the wake channel, the number of running jobs N, then N (job id, tenant, type,
-- attempt) quads (the attempt as `attempt_code`: the slot's fence, see hold.lua), then the policy triples.
-- Returns 1 if this call rebuilt.
if redis.call('exists', P .. 'ready') == 1 then return 0 end
local n = tonumber(ARGV[2])
for i = 3, 2 + 4 * n, 4 do
  if redis.call('hsetnx', P .. 'claims', ARGV[i], '*\t' .. ARGV[i + 1] .. '\t' .. ARGV[i + 2]) == 1 then
    redis.call('zadd', P .. 'claimed_at', 0, ARGV[i])
    redis.call('hincrby', P .. 'run:tenant', ARGV[i + 1], 1)
    redis.call('hincrby', P .. 'run:type', ARGV[i + 2], 1)
    if tonumber(ARGV[i + 3]) > 0 then redis.call('hset', P .. 'attempt', ARGV[i], ARGV[i + 3]) end
  end
end
set_policy(3 + 4 * n)
redis.call('set', P .. 'ready', '1')
redis.call('publish', ARGV[1], '1')
return 1
