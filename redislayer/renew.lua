-- Token compare-and-set lease renewal.
-- KEYS[1] record. ARGV[1] owner token, ARGV[2] lease in ms (>= 1),
-- ARGV[3] new lease end and ARGV[4] expiry if the record must be extended
-- (15 digits, Unix ms, for readers).
-- Reply: 1 renewed, 0 lease lost.
local v = redis.call('GET', KEYS[1])
if not v or string.byte(v, 1) ~= 49 or string.sub(v, 3, 24) ~= ARGV[1] then return 0 end
local lease = tonumber(ARGV[2])
local t = redis.call('PTTL', KEYS[1])
local expiry = string.sub(v, 55, 69)
if t < lease then -- the record never ends before its lease
  t = lease
  expiry = ARGV[4]
end
local mark = tostring(t - lease)
redis.call('SET', KEYS[1],
  string.sub(v, 1, 24) .. string.rep('0', 15 - #mark) .. mark .. ARGV[3] .. expiry .. string.sub(v, 70),
  'PX', t)
return 1
