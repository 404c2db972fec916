-- Claim-or-read in one round trip, deciding a grace or a takeover.
-- KEYS[1] record. ARGV[1] the claim: an in-progress record with a new token
-- (minted by the caller) and lease mark T - lease; ARGV[2] T in ms (>= 1);
-- ARGV[3] the grace in ms (>= 1); ARGV[4] the grace's end (15 digits, Unix
-- ms, for readers).
-- Reply: nil when the key is now claimed by ARGV[1] (a new key, a takeover
-- of a lease whose grace lapsed with the same fingerprint, or this same
-- claim re-sent), else {the stored record, its PTTL in ms}: unchanged, or
-- just granted its grace.
-- Header bytes (1-based): 1 state ('1' in progress, '3' within its grace,
-- '2' completed), 2 waited, 3..24 token, 25..39 lease mark, 40..54 lease
-- end, 55..69 expiry, 70.. fingerprint length and fingerprint.
local v = redis.call('GET', KEYS[1])
local claim = ARGV[1]
if v then
  local state = string.byte(v, 1)
  if state ~= 49 and state ~= 51 then -- completed
    return {v, redis.call('PTTL', KEYS[1])}
  end
  if string.sub(v, 3, 24) == string.sub(claim, 3, 24) then
    return false -- go-redis re-sent this claim after its reply was lost
  end
  -- Same fingerprint, and the TTL has run down to the lease mark: the owner
  -- stopped renewing.
  local t = redis.call('PTTL', KEYS[1])
  if string.sub(v, 70) ~= string.sub(claim, 70) or t > tonumber(string.sub(v, 25, 39)) then
    return {v, t}
  end
  if state == 49 then
    -- The first to find the lease lapsed grants the owner a grace, so that
    -- a completion it is still retrying lands before anyone takes over.
    -- The record lives at least through it.
    local grace = tonumber(ARGV[3])
    local expiry = string.sub(v, 55, 69)
    if t < grace then
      t = grace
      expiry = ARGV[4]
    end
    local mark = tostring(t - grace)
    v = '3' .. string.sub(v, 2, 24) .. string.rep('0', 15 - #mark) .. mark .. ARGV[4] .. expiry .. string.sub(v, 70)
    redis.call('SET', KEYS[1], v, 'PX', t)
    return {v, t}
  end
  -- The grace lapsed too: take over. Waiters of the old owner wait on: keep
  -- the waited flag.
  claim = '1' .. string.sub(v, 2, 2) .. string.sub(claim, 3)
end
redis.call('SET', KEYS[1], claim, 'PX', ARGV[2])
return false
