package idemgrpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// recorder is the ServerTransportStream the handler sees when metadata is
// replayed: it keeps the allowed keys the handler sets, to be stored with
// its answer, and passes only the other keys on to the call's own stream
// (nil when there is none). The allowed keys reach the call, as every
// replay, from the stored answer: the call never sends what the record
// does not hold. A header the handler sends (grpc.SendHeader) is only set
// on the call's stream: it goes out with the answer, once the answer is
// decided, so that the stored header can still join it. Only the handler's
// goroutine uses a recorder while the handler runs, and the execution
// reads it once the handler has returned.
type recorder struct {
	inner   grpc.ServerTransportStream
	allow   map[string]bool
	method  string
	header  metadata.MD
	trailer metadata.MD
}

var _ grpc.ServerTransportStream = (*recorder)(nil)

func (r *recorder) Method() string { return r.method }

func (r *recorder) SetHeader(md metadata.MD) error {
	var rest metadata.MD
	r.header, rest = r.keep(r.header, md)
	if r.inner == nil || len(rest) == 0 {
		return nil
	}
	return r.inner.SetHeader(rest)
}

// SendHeader sets md as SetHeader does: the header goes out with the
// answer.
func (r *recorder) SendHeader(md metadata.MD) error { return r.SetHeader(md) }

func (r *recorder) SetTrailer(md metadata.MD) error {
	var rest metadata.MD
	r.trailer, rest = r.keep(r.trailer, md)
	if r.inner == nil || len(rest) == 0 {
		return nil
	}
	return r.inner.SetTrailer(rest)
}

// keep adds the allowed entries of md to into, and returns the others in
// rest. Keys are compared in lower case, as gRPC sends them.
func (r *recorder) keep(into, md metadata.MD) (kept, rest metadata.MD) {
	for k, vs := range md {
		lk := lower(k)
		if !r.allow[lk] {
			if rest == nil {
				rest = metadata.MD{}
			}
			rest[k] = vs
			continue
		}
		if into == nil {
			into = metadata.MD{}
		}
		into[lk] = append(into[lk], vs...)
	}
	return into, rest
}

// lower returns s in ASCII lower case, without allocating when it is
// already.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
