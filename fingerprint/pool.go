package fingerprint

import (
	"hash"
	"sync"
)

// work is the scratch space of one call: the parser's slices, the output
// buffer and the path-matching states. It is reused through a pool so that
// a steady stream of requests allocates next to nothing.
type work struct {
	p       parser
	out     []byte
	states  []state
	pairs   []pair
	scratch []byte                // unescaped query and form pairs
	mems    []keyRef              // the stream writer's members of open objects
	perm    []byte                // the stream writer's copy of an object it puts in order
	keys    []sortKey             // the stream writer's names of one object, sorting
	shapes  [1 << shapeBits]shape // the stream writer's object shapes, see shape
	// shapeMode is the mode the shapes were found in.
	shapeMode mode
	h         hash.Hash
	memoBuf   []byte // the memo hash's framing, then its sum
}

// Buffers larger than these are dropped rather than pooled, so that one huge
// body does not pin its memory for the life of the process.
const (
	maxPooledTokens = 1 << 16
	maxPooledBytes  = 1 << 20
	// The shapes outlive a body, 32 of them in every pooled work: an object
	// of more names than this sorts them in every body rather than pin
	// their memory.
	maxPooledShape      = 1 << 10
	maxPooledShapeBytes = 16 << 10
)

var workPool = sync.Pool{New: func() any { return new(work) }}

func getWork() *work {
	w := workPool.Get().(*work)
	w.out = w.out[:0]
	w.states = w.states[:0]
	w.pairs = w.pairs[:0]
	return w
}

func putWork(w *work) {
	w.p.in = nil
	if cap(w.p.toks) > maxPooledTokens || cap(w.p.order) > maxPooledTokens || cap(w.p.nums) > maxPooledTokens {
		w.p = parser{}
	}
	if cap(w.p.dec) > maxPooledBytes {
		w.p.dec = nil
	}
	if cap(w.out) > maxPooledBytes {
		w.out = nil
	}
	if cap(w.scratch) > maxPooledBytes {
		w.scratch = nil
	}
	if cap(w.perm) > maxPooledBytes {
		w.perm = nil
	}
	for i := range w.shapes {
		if cap(w.shapes[i].names) > maxPooledShape || cap(w.shapes[i].long) > maxPooledShapeBytes {
			w.shapes[i] = shape{}
		}
	}
	if cap(w.mems) > maxPooledTokens {
		w.mems = nil
	}
	if cap(w.pairs) > maxPooledTokens {
		w.pairs = nil
	}
	workPool.Put(w)
}
