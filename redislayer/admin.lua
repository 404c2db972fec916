-- An operator's compare-and-set release (ARGV[2] 'p': an in-progress
-- record) or forget (ARGV[2] 'c': a completed one) of the record read.
-- KEYS[1] record. ARGV[1] the owner token read.
-- Reply: 1 freed, 0 another record is there (changed), -1 no record.
local h = redis.call('GETRANGE', KEYS[1], 0, 23) -- state, waited, token
if h == '' then return -1 end
local state = string.byte(h, 1)
local ok
if ARGV[2] == 'c' then
  ok = state == 50
else
  ok = state == 49 or state == 51
end
if not ok or string.sub(h, 3) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if state ~= 50 and string.byte(h, 2) == 49 then -- someone waits
  redis.call('PUBLISH', KEYS[1] .. ':done', '0')
end
return 1
