-- Claim-or-read in one round trip, deciding a takeover.
-- KEYS[1] record. ARGV[1] the claim: an in-progress record with a new token
-- (minted by the caller) and lease mark T - lease; ARGV[2] T in ms (>= 1).
-- Reply as SET NX GET's: nil when the key is now claimed by ARGV[1] (a new
-- key, a takeover of a lapsed lease with the same fingerprint, or this same
-- claim re-sent), else the stored record, unchanged.
-- Header bytes (1-based): 1 state, 2 waited, 3..24 token, 25..39 lease
-- mark, 70.. fingerprint length and fingerprint.
local v = redis.call('GET', KEYS[1])
local claim = ARGV[1]
if v and string.byte(v, 1) == 49 then -- '1': in progress
  if string.sub(v, 3, 24) == string.sub(claim, 3, 24) then
    return false -- go-redis re-sent this claim after its reply was lost
  end
  -- Same fingerprint, and the TTL has run down to the lease mark: the owner
  -- stopped renewing.
  if string.sub(v, 70) ~= string.sub(claim, 70)
      or redis.call('PTTL', KEYS[1]) > tonumber(string.sub(v, 25, 39)) then
    return v
  end
  -- Waiters of the old owner wait on: keep the waited flag.
  claim = '1' .. string.sub(v, 2, 2) .. string.sub(claim, 3)
elseif v then
  return v -- completed
end
redis.call('SET', KEYS[1], claim, 'PX', ARGV[2])
return false
