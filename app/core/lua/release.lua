-- Free the slots of jobs that no longer run (declared lost, or a claim MySQL never saw start) and drop the
-- message that held each one. ARGV[1] the wake channel, then job ids. KEYS[1] the queue. Returns how many.
local released = 0
for i = 2, #ARGV do
  local claim = redis.call('hget', P .. 'claims', ARGV[i])
  if claim then
    local holder = string.match(claim, '^[^\t]*')
    release(ARGV[i], '')
    released = released + 1
    if holder ~= '*' then drop_message(KEYS[1], holder) end
  end
end
if released > 0 then redis.call('publish', ARGV[1], '1') end
return released
