-- ARGV: (tenant, report type) pairs. Returns why each would not start now (see `why` above).
local out = {}
for i = 1, #ARGV, 2 do out[#out + 1] = why(ARGV[i], ARGV[i + 1]) end
return out
