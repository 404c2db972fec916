-- Token compare-and-set release of an in-progress claim.
-- KEYS[1] record. ARGV[1] owner token.
-- Reply: 1 released, or nothing there (a re-send); 0 lease lost.
local h = redis.call('GETRANGE', KEYS[1], 0, 23) -- state, waited, token
if h == '' then return 1 end
local state = string.byte(h, 1)
if (state ~= 49 and state ~= 51) or string.sub(h, 3) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if string.byte(h, 2) == 49 then -- someone waits
  redis.call('PUBLISH', KEYS[1] .. ':done', '0')
end
return 1
