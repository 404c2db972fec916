-- Back-fill a completed record decided by another tier.
-- KEYS[1] record. ARGV[1] the completed record, ARGV[2] retention in ms (>= 1).
-- Reply: 1 stored, 0 a completed record was already there (left alone).
if redis.call('GETRANGE', KEYS[1], 0, 0) == '2' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', KEYS[1] .. ':done', '2')
return 1
