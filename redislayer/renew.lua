-- Token compare-and-set lease renewal. A record within its grace ('3') is
-- back on a normal lease ('1'): its next lapse gets a grace again.
-- KEYS[1] record. ARGV[1] owner token, ARGV[2] lease in ms (>= 1),
-- ARGV[3] new lease end and ARGV[4] expiry if the record must be extended
-- (15 digits, Unix ms, for readers), ARGV[5] the lease and its grace in ms:
-- the least TTL the record keeps.
-- Reply: 1 renewed, 0 lease lost.
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local state = string.byte(v, 1)
if (state ~= 49 and state ~= 51) or string.sub(v, 3, 24) ~= ARGV[1] then return 0 end
local lease = tonumber(ARGV[2])
local life = tonumber(ARGV[5])
local t = redis.call('PTTL', KEYS[1])
local expiry = string.sub(v, 55, 69)
if t < life then -- the record never ends before its lease and grace
  t = life
  expiry = ARGV[4]
end
local mark = tostring(t - lease)
redis.call('SET', KEYS[1],
  '1' .. string.sub(v, 2, 24) .. string.rep('0', 15 - #mark) .. mark .. ARGV[3] .. expiry .. string.sub(v, 70),
  'PX', t)
return 1
