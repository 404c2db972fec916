-- Token compare-and-set release of an in-progress claim.
-- KEYS[1] record hash, KEYS[2] lease key. ARGV[1] owner token.
-- Reply: 1 released, or nothing there (a re-send); 0 lease lost.
local v = redis.call('HMGET', KEYS[1], 's', 't')
if not v[1] then return 1 end
if v[1] ~= '1' or v[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', KEYS[1] .. ':done', '0')
return 1
