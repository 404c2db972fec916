package sqllayer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

// MarkProcessedBatch must call an event a duplicate exactly when
// MarkProcessed, called for each ID in turn, would (see batch_fuzz_test.go
// for the pairs of Layers and the backends).

// eventRound is one transaction's events of a consumer.
type eventRound struct {
	ids      []string
	rollback bool
}

// decodeEvents turns data into rounds of event IDs: an ID ends at a 0
// byte, a round at 0xff (committed) or 0xfe (rolled back), bytes no valid
// ID holds. An ID that is not one (empty, too long, not UTF-8) is dropped;
// with once, so is an ID's repeat within its round.
func decodeEvents(data []byte, once bool) []eventRound {
	var rounds []eventRound
	var cur eventRound
	seen := map[string]bool{}
	id := []byte{}
	endID := func() {
		if s := string(id); checkID("event ID", s) == nil && !(once && seen[s]) && len(cur.ids) < 2*fuzzMaxOps {
			cur.ids = append(cur.ids, s)
			seen[s] = true
		}
		id = id[:0]
	}
	for _, b := range data {
		switch b {
		case 0:
			endID()
		case 0xfe, 0xff:
			endID()
			cur.rollback = b == 0xfe
			if len(cur.ids) > 0 && len(rounds) < fuzzMaxRounds {
				rounds = append(rounds, cur)
			}
			cur, seen = eventRound{}, map[string]bool{}
		default:
			id = append(id, b)
		}
	}
	endID()
	if len(cur.ids) > 0 && len(rounds) < fuzzMaxRounds {
		rounds = append(rounds, cur)
	}
	return rounds
}

// FuzzEventBatchAgreesWithSingle: for any rounds of event IDs, each in a
// transaction that commits or rolls back, MarkProcessedBatch calls the
// same IDs duplicates that MarkProcessed, called for each ID in turn,
// does; with a retention that outlives the input, and with one that lapses
// before the next round (expired rows marked anew).
func FuzzEventBatchAgreesWithSingle(f *testing.F) {
	type eventPair struct {
		fuzzPair
		once bool // the retention lapses within a round: no ID twice in one
	}
	var pairs []eventPair
	for _, s := range fuzzBackends(f) {
		pairs = append(pairs,
			eventPair{fuzzPair{s.Kind, fuzzLayer(f, s), fuzzLayer(f, s)}, false},
			eventPair{fuzzPair{s.Kind + ", short retention", fuzzLayer(f, s, WithEventRetention(fuzzShort)), fuzzLayer(f, s, WithEventRetention(fuzzShort))}, true})
	}
	f.Add([]byte("a\x00b\x00a\xffb\x00c\xff"))
	f.Add([]byte("x\x00y\xfex\x00y\x00x\xff"))
	f.Add([]byte(`q"\` + "\x00<&>\x00\u2028\x00😀 ü\x00NULL\x00[1]\xffNULL\x00" + `q"\`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		n := fuzzInputs.Add(1)
		for _, p := range pairs {
			rounds := decodeEvents(data, p.once)
			if len(rounds) == 0 {
				continue
			}
			consumer := testenv.Name(fmt.Sprint("consumer-", n))
			// One transaction at a time: in-memory SQLite has one
			// connection for both Layers.
			inTx := func(l *Layer, rollback bool, fn func(tx bun.Tx) error) {
				tx, err := l.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				err = fn(tx)
				if rollback || err != nil {
					_ = tx.Rollback()
				} else {
					err = tx.Commit()
				}
				if err != nil {
					t.Fatalf("%s: %v\nrounds: %+v", p.name, err, rounds)
				}
			}
			for r, round := range rounds {
				var got []bool
				inTx(p.batched, round.rollback, func(tx bun.Tx) (err error) {
					got, err = p.batched.MarkProcessedBatch(ctx, tx, consumer, round.ids)
					return err
				})
				want := make([]bool, len(round.ids))
				inTx(p.single, round.rollback, func(tx bun.Tx) (err error) {
					for i, id := range round.ids {
						if want[i], err = p.single.MarkProcessed(ctx, tx, consumer, id); err != nil {
							return err
						}
					}
					return nil
				})
				for i, id := range round.ids {
					if got[i] != want[i] {
						t.Fatalf("%s, round %d, event %d (%q): batched says duplicate %v, single %v\nrounds: %+v", p.name, r, i, id, got[i], want[i], rounds)
					}
				}
				if p.once {
					time.Sleep(fuzzPause) // the rows expire
				}
			}
		}
	})
}
