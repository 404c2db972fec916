-- Back-fill a completed record decided by another tier.
-- KEYS[1] record hash, KEYS[2] lease key.
-- ARGV[1] fingerprint, ARGV[2] result, ARGV[3] retention in ms (>= 1),
-- ARGV[4] owner token to remember, or ''.
-- Reply: 1 stored, 0 a completed record was already there (left alone).
if redis.call('HGET', KEYS[1], 's') == '2' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('DEL', KEYS[1], KEYS[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'f', ARGV[1], 's', '2', 'r', ARGV[2], 'e', now + ttl, 't', ARGV[4])
else
  redis.call('HSET', KEYS[1], 'f', ARGV[1], 's', '2', 'r', ARGV[2], 'e', now + ttl)
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PUBLISH', KEYS[1] .. ':done', '2')
return 1
