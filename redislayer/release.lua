-- Token compare-and-set release of an in-progress claim.
-- KEYS[1] record. ARGV[1] owner token.
-- Reply: 1 released, or nothing there (a re-send); 0 lease lost.
local h = redis.call('GETRANGE', KEYS[1], 0, 22) -- state and token only
if h == '' then return 1 end
if string.byte(h, 1) ~= 49 or string.sub(h, 2) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1] .. ':done', '0')
return 1
