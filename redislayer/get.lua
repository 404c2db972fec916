-- Read a record and its TTL. KEYS[1] record.
-- Reply: nil, or {record, PTTL in ms}.
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}
