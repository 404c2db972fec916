-- Read a record and its TTL. KEYS[1] record. ARGV[1] 'w' when a Wait reads:
-- an in-progress record ('1', or '3' within its grace) is then flagged as
-- waited (header byte 2), so that its completion or release is published.
-- Reply: nil, or {record, PTTL in ms}.
local v = redis.call('GET', KEYS[1])
if not v then return false end
local state = string.byte(v, 1)
if ARGV[1] == 'w' and (state == 49 or state == 51) and string.byte(v, 2) ~= 49 then
  redis.call('SETRANGE', KEYS[1], 1, '1') -- keeps the TTL
end
return {v, redis.call('PTTL', KEYS[1])}
