-- Replace the policy. ARGV: the wake channel, then a flat list of (kind, name, value) triples; kinds
-- 'ct' type cap, 'cn' tenant cap, 'cd' default tenant cap, 'w' weight, 'p' paused ("type\tX"/"tenant\tY").
local function set_policy(from)
  redis.call('del', P .. 'cap:type', P .. 'cap:tenant', P .. 'cap:tenant_default')
  redis.call('del', P .. 'weight', P .. 'paused')
  for i = from, #ARGV, 3 do
    local kind, name, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if kind == 'ct' then redis.call('hset', P .. 'cap:type', name, value)
    elseif kind == 'cn' then redis.call('hset', P .. 'cap:tenant', name, value)
    elseif kind == 'cd' then redis.call('set', P .. 'cap:tenant_default', value)
    elseif kind == 'w' then redis.call('hset', P .. 'weight', name, value)
    elseif kind == 'p' then redis.call('sadd', P .. 'paused', name) end
  end
end
