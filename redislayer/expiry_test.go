package redislayer_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

// between is a client whose pipelines run their first command (Reserve's
// PTTL), then fn, then the rest: another client's write landing between
// the PTTL and the read, which a pipeline does not rule out.
type between struct {
	redislayer.Client
	fn func()
}

func (c between) Pipeline() redis.Pipeliner { return betweenPipe{c.Client.Pipeline(), c} }

type betweenPipe struct {
	redis.Pipeliner
	c between
}

func (p betweenPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	cmds := slices.Clone(p.Cmds())
	p.Discard()
	var err error
	for i, cmd := range cmds {
		if i == 1 {
			p.c.fn()
		}
		if e := p.c.Client.Process(ctx, cmd); e != nil && err == nil {
			err = e
		}
	}
	return cmds, err
}

// TestExpiresInWhenTheRecordChangesWithinTheRead: Reserve reads a key's
// PTTL and then its record in one pipeline, not atomically. A record
// written between the two (here a completion with a short retention after a
// PTTL of the claim's hour, or a fill of a key that was missing) must not
// be given the PTTL it did not have: ExpiresIn stays within the record's
// own retention.
func TestExpiresInWhenTheRecordChangesWithinTheRead(t *testing.T) {
	const retention = 5 * time.Second
	for _, o := range fixedOrders {
		t.Run(o.String(), func(t *testing.T) {
			m := testenv.MiniRedis(t).Mini
			client := func() *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			owner := newLayer(t, client())
			var (
				once sync.Once
				fn   func()
			)
			reader := newLayer(t, between{client(), func() { once.Do(fn) }}, redislayer.WithReserveOrder(o))

			k := idem.NewKey("expiry", testenv.Name("completed"))
			rec, claimed, err := owner.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
			if err != nil || !claimed {
				t.Fatalf("claim: %v %v", claimed, err)
			}
			fn = func() {
				if err := owner.Complete(t.Context(), k, rec.Token, []byte("done"), retention); err != nil {
					t.Error(err)
				}
			}
			got, claimed, err := reader.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
			if err != nil || claimed || !got.Completed() {
				t.Fatalf("Reserve: claimed=%v rec=%+v err=%v, want the completion", claimed, got, err)
			}
			if got.ExpiresIn <= 0 || got.ExpiresIn > retention {
				t.Fatalf("completed within the read: ExpiresIn %v, want at most its retention %v", got.ExpiresIn, retention)
			}

			k2 := idem.NewKey("expiry", testenv.Name("filled"))
			once = sync.Once{}
			fn = func() {
				fill := idem.Record{Key: k2, Fingerprint: "other", State: idem.StateCompleted, Result: []byte("filled")}
				if err := owner.Fill(t.Context(), fill, retention); err != nil {
					t.Error(err)
				}
			}
			got, claimed, err = reader.Reserve(t.Context(), k2, "fp", time.Minute, time.Hour)
			if err != nil || claimed || !got.Completed() {
				t.Fatalf("Reserve: claimed=%v rec=%+v err=%v, want the fill", claimed, got, err)
			}
			if got.ExpiresIn <= 0 || got.ExpiresIn > retention {
				t.Fatalf("filled within the read: ExpiresIn %v, want at most its retention %v", got.ExpiresIn, retention)
			}
		})
	}
}

// TestExpiresInOfRecordsWithoutRetention: a completed record written by a
// version of the layer that did not store its retention in the header gets
// ExpiresIn 0 from Reserve's pipelined read (the layer cannot tell), and
// its PTTL from Get, which reads both in one script.
func TestExpiresInOfRecordsWithoutRetention(t *testing.T) {
	for _, o := range fixedOrders {
		t.Run(o.String(), func(t *testing.T) {
			l, m := miniLayer(t, redislayer.WithPrefix("old:"), redislayer.WithReserveOrder(o))
			k := idem.NewKey("expiry", testenv.Name("old"))
			name := "old:{" + k.Hex() + "}"
			v := "20" + strings.Repeat(".", idem.TokenSize) + strings.Repeat("0", 30) + "001767225600000" + "00002fpok"
			if err := m.Set(name, v); err != nil {
				t.Fatal(err)
			}
			m.SetTTL(name, time.Hour)
			rec, claimed, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
			if err != nil || claimed || string(rec.Result) != "ok" || rec.ExpiresIn != 0 {
				t.Fatalf("Reserve: claimed=%v rec=%+v err=%v, want the replay with ExpiresIn 0", claimed, rec, err)
			}
			g, err := l.Get(t.Context(), k)
			if err != nil || g.ExpiresIn <= 59*time.Minute || g.ExpiresIn > time.Hour {
				t.Fatalf("Get: rec=%+v err=%v, want ExpiresIn from the PTTL", g, err)
			}
		})
	}
}
