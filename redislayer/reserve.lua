-- Claim-or-read in one round trip.
-- KEYS[1] record hash, KEYS[2] lease key (same hash tag).
-- ARGV[1] fingerprint, ARGV[2] new owner token (minted by the caller),
-- ARGV[3] lease in ms, ARGV[4] retention in ms (both >= 1).
--
-- Replies (times are Unix ms by the server's clock; fp is false when it
-- equals ARGV[1], so the common case sends no fingerprint back):
--   {0, leaseUntil, expiresAt}          claimed: new key, takeover of a lapsed
--                                       lease, or this same claim re-sent
--   {1, fp, leaseUntil, expiresAt}      in progress, owned by someone else
--   {2, fp, expiresAt, result}          completed
-- A duplicate reads and writes nothing.
local v = redis.call('HMGET', KEYS[1], 's', 'f', 't', 'l', 'e', 'r')
local fp = false
if v[2] and v[2] ~= ARGV[1] then fp = v[2] end
if v[1] == '2' then
  return {2, fp, tonumber(v[5]), v[6]}
end
if v[1] == '1' then
  if v[3] == ARGV[2] then
    -- go-redis re-sent this claim after its first reply was lost.
    return {0, tonumber(v[4]), tonumber(v[5])}
  end
  if fp or redis.call('EXISTS', KEYS[2]) == 1 then
    return {1, fp, tonumber(v[4]), tonumber(v[5])}
  end
  -- Same fingerprint, lease lapsed: take over with the new token.
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local ttl = math.max(tonumber(ARGV[4]), lease)
redis.call('HSET', KEYS[1], 'f', ARGV[1], 's', '1', 't', ARGV[2], 'l', now + lease, 'e', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('SET', KEYS[2], ARGV[2], 'PX', lease)
return {0, now + lease, now + ttl}
