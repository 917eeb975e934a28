-- Free the slots of jobs that no longer run (declared lost, or a claim MySQL never saw start) and drop the
-- message that held each one. KEYS[1] the queue; ARGV[1] the wake channel, then pairs (job id, the slot as
-- the caller saw it: "holder\tclaimed at ms", or '' for whatever holds it). A slot a claim took over since
-- the caller looked (another holder, or the same message claimed again later) is left alone. Returns how many.
local released = 0
for i = 2, #ARGV, 2 do
  local job_id, seen = ARGV[i], ARGV[i + 1]
  local claim = redis.call('hget', P .. 'claims', job_id)
  if claim then
    local holder = string.match(claim, '^[^\t]*')
    local unchanged = seen == ''
    if not unchanged then
      local seen_holder, seen_at = string.match(seen, '^([^\t]*)\t(.*)$')
      local at = tonumber(redis.call('zscore', P .. 'claimed_at', job_id) or '-1')
      unchanged = seen_holder == holder and at == tonumber(seen_at)
    end
    if unchanged then
      release(job_id, '')
      released = released + 1
      if holder ~= '*' then drop_message(KEYS[1], holder) end
    end
  end
end
if released > 0 then redis.call('publish', ARGV[1], '1') end
return released
