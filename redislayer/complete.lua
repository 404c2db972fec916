-- Token compare-and-set completion.
-- KEYS[1] record. ARGV[1] owner token, ARGV[2] result, ARGV[3] expiry (15
-- digits, Unix ms), ARGV[4] retention in ms (>= 1).
-- Reply: 1 completed now, or already completed by this token (a re-send);
--        0 the token does not own the record (lease lost).
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 3, 24) ~= ARGV[1] then return 0 end
if string.byte(v, 1) == 50 then return 1 end -- '2': done by this token
-- The token stays in the record (never shown to readers) so that a re-sent
-- Complete is recognised. The mark becomes the retention, from which a
-- reader learns how long the record has at least left; the lease end 0.
redis.call('SET', KEYS[1],
  '20' .. ARGV[1] .. string.rep('0', 15 - #ARGV[4]) .. ARGV[4] .. '000000000000000' .. ARGV[3] .. string.sub(v, 70) .. ARGV[2],
  'PX', ARGV[4])
if string.byte(v, 2) == 49 then -- someone waits
  redis.call('PUBLISH', KEYS[1] .. ':done', '2')
end
return 1
