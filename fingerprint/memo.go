package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// A retry usually repeats its request byte for byte: the same key, the same
// body. Canonicalizing a JSON body costs some 3 ns a byte; hashing its raw
// bytes with SHA-256 a fourth of that. So each Builder remembers, from
// its second call on, the digests of the last requests whose body it
// canonicalized, under a SHA-256 of everything the digest was computed from
// (the request parts as framed for the digest, the media type, the encoding
// and the raw body), and a request seen before costs that hash instead of
// the canonicalization.
//
// The memo is exact, not a heuristic: the digest is a function of those
// inputs and of the Builder's configuration, which never changes, and two
// inputs share a memo entry only if SHA-256 collides. It is bounded: a fixed
// table of slots indexed by the hash, where a newcomer replaces whatever
// held its slot, so neither many bodies nor large ones make it grow. A
// request that misses pays the raw hash on top of its canonicalization.
const memoSlots = 4096

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
	slots [memoSlots]memoEntry
}

// memoKey hashes the framed request parts pre (nil for Sum), the body's
// kind, media type and encoding, and the raw body. It uses w's hasher and
// buffers, so that it allocates nothing.
func (w *work) memoKey(pre []byte, kind byte, mt, enc string, body []byte) [sha256.Size]byte {
	if w.h == nil {
		w.h = sha256.New()
	}
	w.h.Reset()
	b := append(w.memoBuf[:0], memoDomain...)
	b = appendStr(b, 0, pre)
	b = append(b, kind)
	b = appendStr(b, 0, mt)
	b = appendStr(b, 0, enc)
	b = appendCount(b, len(body))
	w.memoBuf = b
	_, _ = w.h.Write(b)
	_, _ = w.h.Write(body)
	w.memoBuf = w.h.Sum(w.memoBuf[:0])
	return [sha256.Size]byte(w.memoBuf)
}

// memoFor returns b's memo, or nil while b has answered fewer than two
// calls: a Builder made for one call (a new Builder per Sum in a loop)
// then costs neither the table's 224 KiB nor the extra hash, and one that
// lives answers repeats from its second call on.
func (b *Builder) memoFor() *memo {
	if m := b.memo.Load(); m != nil {
		return m
	}
	if b.calls.Add(1) < 2 {
		return nil
	}
	b.memo.CompareAndSwap(nil, new(memo))
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
