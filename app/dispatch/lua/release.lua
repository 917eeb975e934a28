-- Free the slots of jobs that no longer run (declared lost, or a claim MySQL never saw start) and drop the
-- message that held each one. KEYS[1] the queue; ARGV[1] the wake channel, ARGV[2] how long a fence lives
-- (ms), then triples (job id, the slot as the caller saw it: "holder\tclaimed at ms", '' for whatever holds
-- it or '-' for none (leave the slot), the attempt declared over as `attempt_code` or ''). A slot a claim or a start took over since the
-- caller looked (another holder, or the same one claimed or held again later) is left alone. A fence makes a
-- late start of that attempt (its worker still alive) answer 'superseded' in hold.lua. Returns how many.
local released = 0
for i = 3, #ARGV, 3 do
  local job_id, seen, over = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if over ~= '' then
    local fence = P .. 'over:' .. job_id
    if tonumber(redis.call('get', fence) or '-1') < tonumber(over) then
      redis.call('set', fence, over, 'PX', ARGV[2])
    end
  end
  local claim = redis.call('hget', P .. 'claims', job_id)
  if claim and seen ~= '-' then
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
