-- Claim-or-read in one round trip, deciding a takeover.
-- KEYS[1] record. ARGV[1] the claim: an in-progress record with a new token
-- (minted by the caller) and lease mark T - lease; ARGV[2] T in ms (>= 1).
-- Reply as SET NX GET's: nil when the key is now claimed by ARGV[1] (a new
-- key, a takeover of a lapsed lease with the same fingerprint, or this same
-- claim re-sent), else the stored record, unchanged.
local v = redis.call('GET', KEYS[1])
if v and string.byte(v, 1) == 49 then -- '1': in progress
  if string.sub(v, 2, 23) == string.sub(ARGV[1], 2, 23) then
    return false -- go-redis re-sent this claim after its reply was lost
  end
  -- Same fingerprint (header bytes 69..: length and fingerprint) and the TTL
  -- has run down to the lease mark: the owner stopped renewing.
  if string.sub(v, 69) ~= string.sub(ARGV[1], 69)
      or redis.call('PTTL', KEYS[1]) > tonumber(string.sub(v, 24, 38)) then
    return v
  end
elseif v then
  return v -- completed
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
