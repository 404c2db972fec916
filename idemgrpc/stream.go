package idemgrpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// recorder is the ServerTransportStream the handler sees when metadata is
// replayed: it keeps a copy of the allowed keys the handler sets, and
// passes every call on to the call's own stream (nil when there is none).
// Only the handler's goroutine uses it while the handler runs, and the
// execution reads it once the handler has returned.
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
	r.header = r.keep(r.header, md)
	if r.inner == nil {
		return nil
	}
	return r.inner.SetHeader(md)
}

func (r *recorder) SendHeader(md metadata.MD) error {
	r.header = r.keep(r.header, md)
	if r.inner == nil {
		return nil
	}
	return r.inner.SendHeader(md)
}

func (r *recorder) SetTrailer(md metadata.MD) error {
	r.trailer = r.keep(r.trailer, md)
	if r.inner == nil {
		return nil
	}
	return r.inner.SetTrailer(md)
}

// keep adds the allowed entries of md to into. Keys are compared in lower
// case, as gRPC sends them.
func (r *recorder) keep(into, md metadata.MD) metadata.MD {
	for k, vs := range md {
		k = lower(k)
		if !r.allow[k] {
			continue
		}
		if into == nil {
			into = metadata.MD{}
		}
		into[k] = append(into[k], vs...)
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
