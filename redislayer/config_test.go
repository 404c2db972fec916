package redislayer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

// Advice the errors of setup mistakes carry.
const (
	adviseCredentials = "Redis refused the credentials"
	adviseACL         = "the ACL forbids the client's user"
	adviseDB          = "the DB number of the client's options does not exist"
)

// guardedServer starts a redis-server that requires the password "secret"
// of its default user and knows the users given as ACL SETUSER rules, each
// with the password "pw".
func guardedServer(t *testing.T, users map[string][]string) *testenv.RedisServer {
	s := testenv.StartRedisServer(t)
	admin := redis.NewClient(s.Options())
	defer admin.Close()
	for name, rules := range users {
		args := append([]any{"ACL", "SETUSER", name, "on", ">pw"}, toAny(rules)...)
		if err := admin.Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s: %v", name, err)
		}
	}
	if err := admin.ConfigSet(t.Context(), "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestConfigErrors: credentials the server refuses, an ACL that forbids
// what the layer needs, a DB the server lacks: every call fails with
// idem.ErrConfig and says what to change, never with idem.ErrUnavailable
// (which would make every keyed request a "retry later").
func TestConfigErrors(t *testing.T) {
	s := guardedServer(t, map[string][]string{
		"noscripts": {"~*", "&*", "+@all", "-evalsha", "-eval"},
		"otherkeys": {"~other:*", "&*", "+@all"},
	})
	for _, tc := range []struct {
		name           string
		user, password string
		db             int
		advice         string
		claims         bool // a new key's claim is a plain SET, which the ACL allows
	}{
		{"no password", "", "", 0, adviseCredentials, false},
		{"wrong password", "", "wrong", 0, adviseCredentials, false},
		{"unknown user", "nobody", "pw", 0, adviseCredentials, false},
		{"ACL without scripts", "noscripts", "pw", 0, adviseACL, true},
		{"ACL without the prefix's keys", "otherkeys", "pw", 0, adviseACL, false},
		{"DB out of range", "", "secret", 99, adviseDB, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range []idem.ReserveOrder{idem.OrderReadFirst, idem.OrderClaimFirst} {
				o := s.Options()
				o.Username, o.Password, o.DB = tc.user, tc.password, tc.db
				c := redis.NewClient(o)
				t.Cleanup(func() { _ = c.Close() })
				l := newLayer(t, c, redislayer.WithReserveOrder(order), redislayer.WithTimeout(faultBound))
				k := idem.NewKey("config", testenv.Name("k"))
				errs := every(t.Context(), l, k, "token")
				if tc.claims {
					if err := errs["Reserve"]; err != nil {
						t.Errorf("%v: Reserve of a new key: %v", order, err)
					}
					delete(errs, "Reserve")
				}
				// The key is in progress now if the claim went through, and a
				// duplicate of it needs reserve.lua.
				_, _, errs["Reserve again"] = l.Reserve(t.Context(), k, "fp", time.Minute, time.Minute)
				_, errs["Wait"] = l.Wait(t.Context(), k)
				errs["Check"] = l.Check(t.Context())
				for op, err := range errs {
					if !errors.Is(err, idem.ErrConfig) || errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), tc.advice) {
						t.Errorf("%v: %s: %v; want idem.ErrConfig, not idem.ErrUnavailable, saying %q", order, op, err, tc.advice)
					}
				}
				t.Logf("%v: observed: %v", order, errs["Reserve again"])
			}
		})
	}
}

// TestCheck: Check answers nil when the layer can work (also after the
// server forgot its scripts), idem.ErrUnavailable when Redis is down.
func TestCheck(t *testing.T) {
	s := guardedServer(t, nil)
	o := s.Options()
	o.Password = "secret"
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	l := newLayer(t, c, redislayer.WithTimeout(faultBound))
	if err := l.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(t.Context()); err != nil {
		t.Fatalf("Check after SCRIPT FLUSH: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Check(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Check cancelled by its caller: %v, want context.Canceled", err)
	}
	s.Kill()
	err := l.Check(t.Context())
	if !errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Check of a dead server: %v, want idem.ErrUnavailable", err)
	}
	t.Logf("observed: %v", err)
	s.Restart()
	if err := l.Check(t.Context()); err != nil {
		t.Fatalf("Check after a restart (no password any more): %v", err)
	}
}
