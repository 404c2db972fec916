-- Token compare-and-set lease renewal.
-- KEYS[1] record hash, KEYS[2] lease key. ARGV[1] owner token, ARGV[2] lease in ms (>= 1).
-- Reply: 1 renewed, 0 lease lost.
local v = redis.call('HMGET', KEYS[1], 's', 't')
if v[1] ~= '1' or v[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', lease)
if redis.call('PTTL', KEYS[1]) < lease then
  -- The record never ends before its lease.
  redis.call('PEXPIRE', KEYS[1], lease)
  redis.call('HSET', KEYS[1], 'l', now + lease, 'e', now + lease)
else
  redis.call('HSET', KEYS[1], 'l', now + lease)
end
return 1
