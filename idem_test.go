package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemkit/idem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   [2]string
		sameAs bool
	}{
		{"same inputs", [2]string{"t1", "k"}, [2]string{"t1", "k"}, true},
		{"scopes differ", [2]string{"t1", "k"}, [2]string{"t2", "k"}, false},
		{"no concatenation collision", [2]string{"ab", "c"}, [2]string{"a", "bc"}, false},
		{"empty scope is its own scope", [2]string{"", "k"}, [2]string{"k", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := idem.NewKey(tc.a[0], tc.a[1]), idem.NewKey(tc.b[0], tc.b[1])
			if a.Equal(b) != tc.sameAs {
				t.Fatalf("Equal = %v, want %v", a.Equal(b), tc.sameAs)
			}
		})
	}
}

// The digest of a key must never change across machines or releases: stored
// records would become unreachable. The value was computed outside Go:
// SHA-256("idem/key/v1" || be64(len scope) || scope || be64(len key) || key).
func TestKeyGolden(t *testing.T) {
	k := idem.NewKey("tenant-42", "8e1f6d2a-4b7c-4e1a-9d3b-2f5c6a7b8c9d")
	const want = "3a29c90f5d6029e56ba26af26fd20c8abac3801d1b502340e8c5bede5640abc9"
	if got := k.Hex(); got != want {
		t.Fatalf("Hex = %s, want %s", got, want)
	}
}

func TestKeyString(t *testing.T) {
	k := idem.NewKey("secret-tenant", "secret-client-key")
	s := k.String()
	if strings.Contains(s, "secret") || len(s) != 16 {
		t.Fatalf("String = %q: want 16 hex characters and no labels", s)
	}
	if k.Scope() != "secret-tenant" || k.ClientKey() != "secret-client-key" {
		t.Fatal("labels lost")
	}
	long := idem.NewKey(strings.Repeat("s", 1000), strings.Repeat("c", 1000))
	if len(long.Scope()) != 255 || len(long.ClientKey()) != 255 {
		t.Fatal("labels are not cut to 255 bytes")
	}
}

func TestKeyFromHex(t *testing.T) {
	k := idem.NewKey("a", "b")
	p, err := idem.KeyFromHex(k.Hex())
	if err != nil || !p.Equal(k) || p.Scope() != "" {
		t.Fatalf("KeyFromHex(Hex) = %v, %v", p, err)
	}
	for _, bad := range []string{"", "zz", strings.Repeat("0", 64), strings.Repeat("g", 64), k.Hex() + "00"} {
		if _, err := idem.KeyFromHex(bad); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("KeyFromHex(%q) err = %v, want ErrInvalidKey", bad, err)
		}
	}
}

func TestTokensAreRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := idem.NewToken()
		if len(tok) != idem.TokenSize || seen[tok] {
			t.Fatalf("token %q: wrong size or repeated", tok)
		}
		seen[tok] = true
	}
}

func TestObservers(t *testing.T) {
	if idem.Observers(nil, nil) != nil {
		t.Fatal("Observers of nothing must be nil (the fast path)")
	}
	var got []idem.EventKind
	o := idem.ObserverFunc(func(_ context.Context, e idem.Event) { got = append(got, e.Kind) })
	idem.Observers(o, nil, o).Observe(t.Context(), idem.Event{Kind: idem.EventNew})
	if len(got) != 2 {
		t.Fatalf("fan-out delivered %d events, want 2", len(got))
	}
	if _, ok := idem.Observers(o, o).(idem.Tracer); ok {
		t.Fatal("a fan-out of plain observers claims to be a Tracer")
	}
	for k := idem.EventNew; k <= idem.EventReleased; k++ {
		if k.String() == "unknown" {
			t.Errorf("event kind %d has no name", k)
		}
	}
}
