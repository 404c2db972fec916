-- Read a record and its TTL. KEYS[1] record. ARGV[1] 'w' when a Wait reads:
-- an in-progress record is then flagged as waited (header byte 2), so that
-- its completion or release is published.
-- Reply: nil, or {record, PTTL in ms}.
local v = redis.call('GET', KEYS[1])
if not v then return false end
if ARGV[1] == 'w' and string.byte(v, 1) == 49 and string.byte(v, 2) ~= 49 then
  redis.call('SETRANGE', KEYS[1], 1, '1') -- keeps the TTL
end
return {v, redis.call('PTTL', KEYS[1])}
