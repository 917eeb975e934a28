-- A full walk of a sweep begins or resumes: the walk's epoch, kept in the sweep's state hash (KEYS[1]).
-- An epoch already there (a walk under way, its cursors beside it) is the one to resume; else the hash is
-- cleared of whatever a walk from before a flush wrote into it and ARGV[1] becomes the epoch.
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch then
  return epoch
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'epoch', ARGV[1])
return ARGV[1]
