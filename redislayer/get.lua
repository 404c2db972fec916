-- Read a record without its token.
-- KEYS[1] record hash, KEYS[2] lease key.
-- Replies (times in Unix ms by the server's clock):
--   nil                                            no record
--   {1, fp, leaseUntil, expiresAt, leasePTTL}      in progress (leasePTTL -2: lapsed)
--   {2, fp, 0, expiresAt, result}                  completed
local v = redis.call('HMGET', KEYS[1], 's', 'f', 'l', 'e', 'r')
if not v[1] then return false end
if v[1] == '2' then return {2, v[2], 0, tonumber(v[4]), v[5]} end
return {1, v[2], tonumber(v[3]), tonumber(v[4]), redis.call('PTTL', KEYS[2])}
