-- Token compare-and-set completion.
-- KEYS[1] record hash, KEYS[2] lease key.
-- ARGV[1] owner token, ARGV[2] result, ARGV[3] retention in ms (>= 1).
-- Reply: 1 completed now or already completed by this token (a re-send),
--        0 the token does not own the record (lease lost).
local v = redis.call('HMGET', KEYS[1], 's', 't')
if v[2] ~= ARGV[1] then return 0 end
if v[1] == '2' then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
-- The token stays in the hash (never returned to readers) so that a re-sent
-- Complete is recognised; field l is meaningless once s is 2.
redis.call('HSET', KEYS[1], 's', '2', 'r', ARGV[2], 'e', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', KEYS[1] .. ':done', '2')
return 1
