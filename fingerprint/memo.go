package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// A retry usually repeats its request byte for byte: the same key, the same
// body. Canonicalizing a JSON body and hashing the result costs some four
// times what hashing its raw bytes with SHA-256 does. So each Builder
// remembers, from its second call on, the digests of the last requests
// whose body it canonicalized, under a SHA-256 of everything the digest
// was computed from (the request parts as framed for the digest, the media
// type, the encoding and the raw body), and a request seen before costs
// that hash instead of the canonicalization.
//
// Most requests are never repeated, and for them that SHA-256 would be a
// fourth of what a new body costs. So a request pays it only from its second
// sighting: a first one costs a fast non-cryptographic hash of the same
// inputs (maphash, with a seed of the Builder's own), noted in a table of
// sightings. When that hash is there already, the request is probably a
// repeat: it pays the SHA-256, is answered from the memo if it is there, and
// is remembered if not. A retry is therefore answered from its second
// repeat on; the first one costs what a new body cost before sightings.
//
// The memo is exact, not a heuristic: the digest is a function of those
// inputs and of the Builder's configuration, which never changes, and two
// inputs share a memo entry only if SHA-256 collides. The sightings only
// decide whether to pay that hash: a collision of two fast hashes costs one
// SHA-256 that finds nothing, and never an answer. Both tables are bounded:
// fixed slots indexed by the hash, where a newcomer replaces whatever held
// its slot, so neither many bodies nor large ones make them grow.
const memoSlots = 4096

// sightSlots is the size of the table of sightings. An entry is 8 bytes,
// so it holds four times as many requests as the memo for an eighth of its
// memory: a retry that comes after some 16,000 other requests is seen as new.
const sightSlots = 4 * memoSlots

// memoDomain opens every memo hash, so that it can never equal a digest's
// message hash.
const memoDomain = "idem.fingerprint.memo.v1\x00"

// memoEntry is one slot of the memo. Its mutex guards raw and fp. A slot
// is written in place, under its own lock, so that remembering a digest
// allocates nothing beyond the digest string itself.
type memoEntry struct {
	mu  sync.Mutex
	raw [sha256.Size]byte
	fp  string // "" while the slot is empty
}

type memo struct {
	seed  maphash.Seed
	sight [sightSlots]atomic.Uint64 // fast hashes of recent inputs, 0 for none
	slots [memoSlots]memoEntry
}

// memoFrame writes the framing of a memo hash to w.memoBuf: the framed
// request parts pre (nil for Sum), the body's kind, media type and
// encoding, and the body's length.
func (w *work) memoFrame(pre []byte, kind byte, mt, enc string, n int) []byte {
	b := append(w.memoBuf[:0], memoDomain...)
	b = appendStr(b, 0, pre)
	b = append(b, kind)
	b = appendStr(b, 0, mt)
	b = appendStr(b, 0, enc)
	b = appendCount(b, n)
	w.memoBuf = b
	return b
}

// memoKey hashes the framing (memoFrame) and the raw body with SHA-256. It
// uses w's hasher and buffers, so that it allocates nothing.
func (w *work) memoKey(pre []byte, kind byte, mt, enc string, body []byte) [sha256.Size]byte {
	if w.h == nil {
		w.h = sha256.New()
	}
	w.h.Reset()
	_, _ = w.h.Write(w.memoFrame(pre, kind, mt, enc, len(body)))
	_, _ = w.h.Write(body)
	w.memoBuf = w.h.Sum(w.memoBuf[:0])
	return [sha256.Size]byte(w.memoBuf)
}

// seenBefore reports whether the inputs memoKey would hash were probably
// seen before, and notes them as seen. It costs a fast hash of them.
func (m *memo) seenBefore(w *work, pre []byte, kind byte, mt, enc string, body []byte) bool {
	h := maphash.Bytes(m.seed, w.memoFrame(pre, kind, mt, enc, len(body)))
	h = bits.RotateLeft64(h, 29) ^ maphash.Bytes(m.seed, body)
	h |= 1 // 0 marks an empty slot
	s := &m.sight[(h>>1)%sightSlots]
	if s.Load() == h {
		return true
	}
	s.Store(h)
	return false
}

// memoFor returns b's memo, or nil while b has answered fewer than two
// calls: a Builder made for one call (a new Builder per Sum in a loop)
// then costs neither the tables' 352 KiB nor a hash, and one that lives
// notes sightings from its second call on.
func (b *Builder) memoFor() *memo {
	if m := b.memo.Load(); m != nil {
		return m
	}
	if b.calls.Add(1) < 2 {
		return nil
	}
	m := new(memo)
	m.seed = maphash.MakeSeed()
	b.memo.CompareAndSwap(nil, m)
	return b.memo.Load()
}

func (m *memo) slot(k *[sha256.Size]byte) *memoEntry {
	return &m.slots[binary.LittleEndian.Uint64(k[:8])%memoSlots]
}

// get returns the digest remembered under k.
func (m *memo) get(k *[sha256.Size]byte) (string, bool) {
	e := m.slot(k)
	e.mu.Lock()
	fp, ok := e.fp, e.fp != "" && e.raw == *k
	e.mu.Unlock()
	return fp, ok
}

// put remembers fp under k, in place of whatever held k's slot.
func (m *memo) put(k *[sha256.Size]byte, fp string) {
	e := m.slot(k)
	e.mu.Lock()
	e.raw, e.fp = *k, fp
	e.mu.Unlock()
}
