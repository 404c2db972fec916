package idemgrpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/idemgrpc"
)

type accountKey struct{}

// A second account that sends the first one's key and message gets its own
// answer; the first account's retry with a refreshed token replays; a call
// whose account is unknown is refused before any claim.
func TestScopeFromContext(t *testing.T) {
	tokens := map[string]string{"acme-1": "acme", "acme-2": "acme", "globex-1": "globex"}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) == 1 {
			if account, ok := tokens[strings.TrimPrefix(v[0], "Bearer ")]; ok {
				ctx = context.WithValue(ctx, accountKey{}, account)
			}
		}
		return h(ctx, req)
	}
	var runs atomic.Int64
	svc := &service{charge: func(ctx context.Context, _ *structpb.Struct) (*structpb.Struct, error) {
		return structpb.NewStruct(map[string]any{"payment_of": ctx.Value(accountKey{}), "run": float64(runs.Add(1))})
	}}
	icpt, err := idemgrpc.UnaryServerInterceptor(memStore(t), idemgrpc.WithScope(idemgrpc.ScopeFromContext(accountKey{})))
	if err != nil {
		t.Fatal(err)
	}
	conn := serve(t, svc, auth, icpt)
	as := func(token string) reply {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), 30*time.Second)
		defer cancel()
		return callCtx(ctx, conn, methodCharge, key("order-1"), msg(t, map[string]any{"amount": 100}))
	}
	first, other, refreshed := as("acme-1"), as("globex-1"), as("acme-2")
	if first.err != nil || other.err != nil || refreshed.err != nil {
		t.Fatalf("errors: %v, %v, %v", first.err, other.err, refreshed.err)
	}
	if first.resp.AsMap()["payment_of"] != "acme" || other.resp.AsMap()["payment_of"] != "globex" {
		t.Fatalf("acme got %v, globex got %v", first.resp.AsMap(), other.resp.AsMap())
	}
	if !refreshed.replayed || refreshed.resp.AsMap()["run"] != first.resp.AsMap()["run"] {
		t.Fatalf("acme's retry after a refresh: %v (replayed %v), want the replay of %v", refreshed.resp.AsMap(), refreshed.replayed, first.resp.AsMap())
	}
	if r := as("stolen"); r.code() != codes.Unauthenticated || reason(t, r.err) != idemgrpc.ReasonScopeMissing {
		t.Fatalf("unknown account: %v, want Unauthenticated %s", r.err, idemgrpc.ReasonScopeMissing)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// ScopeFromPeer names the caller by its verified client certificate's
// identity: a renewed certificate (a new key and serial, the same SPIFFE
// ID) is the same caller, another identity is another.
func TestScopeFromPeer(t *testing.T) {
	ca, caKey := newCA(t)
	serverCert := leaf(t, ca, caKey, "server", nil, true)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
	var runs atomic.Int64
	svc := &service{charge: func(context.Context, *structpb.Struct) (*structpb.Struct, error) {
		return structpb.NewStruct(map[string]any{"run": float64(runs.Add(1))})
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(creds), grpc.ChainUnaryInterceptor(must(t, memStore(t), idemgrpc.WithScope(idemgrpc.ScopeFromPeer))))
	srv.RegisterService(&serviceDesc, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	dial := func(cert *tls.Certificate) *grpc.ClientConn {
		cfg := &tls.Config{RootCAs: pool, ServerName: "server", MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	acme := leaf(t, ca, caKey, "acme", &url.URL{Scheme: "spiffe", Host: "example.org", Path: "/acme"}, false)
	acmeRenewed := leaf(t, ca, caKey, "acme", &url.URL{Scheme: "spiffe", Host: "example.org", Path: "/acme"}, false)
	globex := leaf(t, ca, caKey, "globex", nil, false)
	req := msg(t, map[string]any{"amount": 1})
	a := call(t, dial(&acme), methodCharge, key("k"), req)
	b := call(t, dial(&acmeRenewed), methodCharge, key("k"), req)
	c := call(t, dial(&globex), methodCharge, key("k"), req)
	if a.err != nil || b.err != nil || c.err != nil {
		t.Fatalf("errors: %v, %v, %v", a.err, b.err, c.err)
	}
	if !b.replayed || c.replayed || runs.Load() != 2 {
		t.Fatalf("renewed certificate replayed %v, other identity replayed %v, runs %d; want true, false, 2", b.replayed, c.replayed, runs.Load())
	}
	if r := call(t, dial(nil), methodCharge, key("k"), req); r.code() != codes.Unauthenticated {
		t.Fatalf("no client certificate: %v, want Unauthenticated", r.err)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, k
}

// leaf issues a certificate for name (a server's DNS name, or a client's
// common name with an optional URI SAN), with a fresh key and serial.
func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, uri *url.URL, server bool) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"idem tests"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.DNSNames, tmpl.ExtKeyUsage = []string{name}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	if uri != nil {
		tmpl.URIs = []*url.URL{uri}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}
