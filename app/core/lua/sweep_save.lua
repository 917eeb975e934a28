-- Save a sweep's cursor fields (ARGV[3..]: field, value, ...) only if the state hash (KEYS[1]) still holds
-- the walker's epoch (ARGV[1]) and, for a steady walk (ARGV[2] = '1'), its "swept" mark: after a flush,
-- or once a newer walk began, a walker that read the old state writes nothing. 1 if saved, else 0.
if (redis.call('HGET', KEYS[1], 'epoch') or '') ~= ARGV[1] then
  return 0
end
if ARGV[2] == '1' and redis.call('HEXISTS', KEYS[1], 'swept') == 0 then
  return 0
end
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
