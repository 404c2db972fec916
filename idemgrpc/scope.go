package idemgrpc

import (
	"context"
	"crypto/x509"
	"errors"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/idemkit/idem/middleware"
)

// errNoScope refuses a configuration that names no scope.
var errNoScope = errors.New("WithScope: give the scope of a call, the principal who made it (for example idemgrpc.ScopeFromContext(key) for the user or tenant your authentication interceptor puts in the context, or idemgrpc.ScopeFromPeer for a verified client certificate), or WithSingleTenant() for a service with one principal; without either, one caller's stored answer would reach any other caller who sends the same key")

// ScopeFromContext returns a scope function for WithScope that reads the
// principal from the call's context under key, where an authentication
// interceptor that runs before this one put it (context.WithValue). A
// string is the scope as it is; a fmt.Stringer gives its String(); an
// integer its decimal form (middleware.ScopeOf). Anything else, or no
// value, names no principal, and the call fails with Unauthenticated. Put
// a stable id there (a user, account or tenant id), never the token
// itself.
func ScopeFromContext(key any) func(ctx context.Context, fullMethod string) string {
	return func(ctx context.Context, _ string) string { return middleware.ScopeOf(ctx.Value(key)) }
}

// ScopeFromPeer is a scope function for WithScope that names the caller by
// the client certificate the server verified (mutual TLS): the first URI
// of its subject alternative names (a SPIFFE ID, say) when it has one,
// else its subject's distinguished name. Neither changes when the
// certificate is renewed, so a retry after a rotation is the same
// operation. A call without a verified client certificate names no
// principal and fails with Unauthenticated. The peer's address is never
// used: it changes with every connection.
func ScopeFromPeer(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return certIdentity(info.State.VerifiedChains[0][0])
}

// certIdentity names a leaf certificate's subject: its first URI SAN, or
// its subject's distinguished name.
func certIdentity(c *x509.Certificate) string {
	if len(c.URIs) > 0 {
		return "uri:" + c.URIs[0].String()
	}
	if dn := c.Subject.String(); dn != "" {
		return "dn:" + dn
	}
	return ""
}
