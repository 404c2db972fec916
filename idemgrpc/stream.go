package idemgrpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// recorder is the ServerTransportStream the handler sees: it keeps the
// metadata keys WithReplayMetadata names, to be stored with its answer, and
// drops the others. The kept keys reach the handler's own call, as every
// replay, from the stored answer, so that the call never gets metadata the
// record does not hold: what a retry cannot get, the first caller does not
// get either. A header the handler sends (grpc.SendHeader) is kept the same
// way and goes out with the answer, once the answer is decided. Only the
// handler's goroutine uses a recorder while the handler runs, and the
// execution reads it once the handler has returned.
type recorder struct {
	allow   map[string]bool // lower-case names; nil: none
	method  string
	header  metadata.MD
	trailer metadata.MD
}

var _ grpc.ServerTransportStream = (*recorder)(nil)

func (r *recorder) Method() string { return r.method }

func (r *recorder) SetHeader(md metadata.MD) error {
	r.header = r.keep(r.header, md)
	return nil
}

func (r *recorder) SendHeader(md metadata.MD) error { return r.SetHeader(md) }

func (r *recorder) SetTrailer(md metadata.MD) error {
	r.trailer = r.keep(r.trailer, md)
	return nil
}

// keep adds to into the keys of md that are allowed, and returns it.
func (r *recorder) keep(into, md metadata.MD) metadata.MD {
	for k, vs := range md {
		lk := lower(k)
		if !r.allow[lk] {
			continue
		}
		if into == nil {
			into = metadata.MD{}
		}
		into[lk] = append(into[lk], vs...)
	}
	return into
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
