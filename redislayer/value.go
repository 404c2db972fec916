package redislayer

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/idemkit/idem"
)

// A record is stored as one string: a fixed header that the Lua scripts read
// with string.sub at known offsets, then the fingerprint and the result.
//
//	offset  size  field
//	0       1     state: '1' in progress, '3' in progress within the grace
//	              a Reserve granted when it found the lease lapsed, '2'
//	              completed
//	1       1     waited: '1' once a Wait has read the in-progress record
//	2       22    owner token (idem.TokenSize); '.' × 22 when none
//	24      15    mark: in progress, the record's PTTL (ms) at or below which
//	              the lease has lapsed; completed, the retention (ms) the
//	              record was stored with (0 when written by a version that
//	              did not store it)
//	39      15    lease end, Unix ms (0 once completed)
//	54      15    expiry, Unix ms
//	69      5     fingerprint length
//	74      n     fingerprint
//	74+n    ...   result (completed only)
//
// Numbers are zero-padded decimal, so that Lua reads them with tonumber and
// Go without allocating. The lease mark makes the lease a matter of the key's
// TTL alone: a claim stores the record for T = max(ttl, lease + grace)
// (the grace a quarter of the lease) with mark T - lease, so the lease
// lapses exactly when Redis has counted lease off the TTL, with at least
// the grace still to run, and no clock but Redis's expiry decides (and
// miniredis's FastForward moves it too). The two times are for readers
// only, from the writer's clock.
//
// Every write that sets a record's TTL stores a mark no greater than that
// TTL, and no write shortens the TTL of a record it leaves as it was (a
// renewal or a grace only raises an in-progress record's, a waiter's flag
// keeps it, and a completed record's never changes; a completion or a
// takeover writes another record). So a record read right after a PTTL of
// its key lives, from the moment the PTTL was sent, at least the smaller of
// that PTTL and its mark: either it was there when the PTTL ran, or it was
// written later with a TTL of at least its mark. That is how Reserve learns
// ExpiresIn in one round trip without a script.
//
// The waited flag spares Complete and Release a PUBLISH when no one waits,
// which is nearly always: a Wait sets it in the same script that reads the
// record, so a completion either comes before that read (the waiter sees
// it) or sees the flag (and publishes). A takeover, a grace and a renewal
// keep it.
const (
	offWaited = 1
	offToken  = 2
	offMark   = offToken + idem.TokenSize
	offLease  = offMark + numWidth
	offExpiry = offLease + numWidth
	offFPLen  = offExpiry + numWidth
	hdrSize   = offFPLen + fpLenWidth

	numWidth   = 15
	fpLenWidth = 5

	// maxMillis is the largest duration, in ms, the header holds (about
	// 31,000 years).
	maxMillis = 999_999_999_999_999

	stateInProgress = '1'
	stateCompleted  = '2'
	stateGrace      = '3'
	noToken         = "......................" // not base64url: matches no token
)

// encode returns a record value with a header and fingerprint, and room for
// result bytes after them.
func encode(state byte, token string, mark, leaseUntil, expiresAt int64, fp string, result []byte) []byte {
	if len(token) != idem.TokenSize {
		token = noToken
	}
	b := make([]byte, hdrSize, hdrSize+len(fp)+len(result))
	b[0] = state
	b[offWaited] = '0'
	copy(b[offToken:], token)
	putNum(b[offMark:offLease], mark)
	putNum(b[offLease:offExpiry], leaseUntil)
	putNum(b[offExpiry:offFPLen], expiresAt)
	putNum(b[offFPLen:hdrSize], int64(len(fp)))
	b = append(b, fp...)
	return append(b, result...)
}

// putNum writes n as zero-padded decimal filling b.
func putNum(b []byte, n int64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
}

func getNum(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// stored is a decoded value, its strings pointing into the value.
type stored struct {
	state  byte
	token  string
	mark   int64
	lease  int64
	expiry int64
	fp     string
	result string
}

func decode(v string) (stored, error) {
	var s stored
	if len(v) < hdrSize || (v[0] != stateInProgress && v[0] != stateCompleted && v[0] != stateGrace) {
		return s, fmt.Errorf("%w: redislayer: malformed record (%d bytes)", idem.ErrUnavailable, len(v))
	}
	s.state, s.token = v[0], v[offToken:offMark]
	var ok [4]bool
	s.mark, ok[0] = getNum(v[offMark:offLease])
	s.lease, ok[1] = getNum(v[offLease:offExpiry])
	s.expiry, ok[2] = getNum(v[offExpiry:offFPLen])
	n, ok3 := getNum(v[offFPLen:hdrSize])
	ok[3] = ok3 && int(n) <= len(v)-hdrSize
	if ok != [4]bool{true, true, true, true} {
		return s, fmt.Errorf("%w: redislayer: malformed record header", idem.ErrUnavailable)
	}
	s.fp, s.result = v[hdrSize:hdrSize+int(n)], v[hdrSize+int(n):]
	return s, nil
}

// inProgress reports whether s is in progress, within a grace or not.
func (s stored) inProgress() bool { return s.state != stateCompleted }

// record converts s into the record a reader sees: no token, the result
// copied, left as ExpiresIn. fingerprint is the caller's; when s has the
// same one, the record shares the caller's string instead of pinning v.
func (s stored) record(key idem.Key, fingerprint string, left time.Duration) idem.Record {
	rec := idem.Record{Key: key, Fingerprint: fingerprint, ExpiresAt: fromMillis(s.expiry), ExpiresIn: left}
	if s.fp != fingerprint {
		rec.Fingerprint = string(append([]byte(nil), s.fp...))
	}
	if s.state == stateCompleted {
		rec.State = idem.StateCompleted
		rec.Result = resultBytes(s.result)
	} else {
		rec.State = idem.StateInProgress
		rec.LeaseUntil = fromMillis(s.lease)
	}
	return rec
}

// expiresIn returns how long s, read right after a PTTL of its key that
// answered pttl (ms) in the same pipeline, lives at least from the moment
// the PTTL was sent: the smaller of the PTTL and the mark, or the mark alone
// when the key was missing then (-2: the record was written later, with a
// TTL of at least its mark). Redis counts whole milliseconds, so one is
// taken off. Zero when the key had no TTL (-1), which the layer never
// leaves.
func (s stored) expiresIn(pttl int64) time.Duration {
	b := s.mark
	if pttl != -2 {
		if pttl < 0 {
			return 0
		}
		b = min(b, pttl)
	}
	return leftMillis(b)
}

// leftMillis converts a remaining life in whole milliseconds, as Redis
// counts it, to ExpiresIn: less one millisecond, since Redis's clock reads
// whole milliseconds and the moment it stood for may be up to one later.
func leftMillis(ms int64) time.Duration {
	return time.Duration(max(ms-1, 0)) * time.Millisecond
}

// resultBytes returns the result bytes of a value, without copying them.
// Every value comes from a reply go-redis allocated for this call alone and
// drops with it, and the layer keeps nothing else of it, so the caller gets
// the only reference: a large result costs no second copy. The slice's
// capacity is its length, so an append by the caller copies.
func resultBytes(r string) []byte {
	if r == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(r), len(r))
}
