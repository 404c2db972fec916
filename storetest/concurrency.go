package storetest

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
)

// instances returns n layers over the shared backend.
func (s *suite) instances(t *testing.T, n int) []idem.Layer {
	ls := make([]idem.Layer, n)
	for i := range ls {
		ls[i] = s.h.New(t)
	}
	return ls
}

func (s *suite) oneKeyManyContenders(t *testing.T) {
	ls := s.instances(t, 4)
	k := s.key()
	var (
		claims atomic.Int32
		start  = make(chan struct{})
		wg     sync.WaitGroup
		errs   = make(chan error, s.h.Contenders)
	)
	for i := range s.h.Contenders {
		wg.Go(func() {
			<-start
			rec, claimed, err := ls[i%len(ls)].Reserve(ctx(t), k, fpA, long, long)
			if err != nil {
				errs <- err
				return
			}
			if claimed {
				claims.Add(1)
			} else if rec.State != idem.StateInProgress || rec.Fingerprint != fpA {
				t.Errorf("loser saw %+v", rec)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Reserve: %v", err)
	}
	if n := claims.Load(); n != 1 {
		t.Fatalf("%d goroutines on one key: %d claims, want exactly 1", s.h.Contenders, n)
	}
}

func (s *suite) manyKeys(t *testing.T) {
	const contenders = 8
	ls := s.instances(t, 4)
	keys := make([]idem.Key, s.h.Keys)
	for i := range keys {
		keys[i] = s.key()
	}
	claims := make([]atomic.Int32, len(keys))
	var (
		start  = make(chan struct{})
		wg     sync.WaitGroup
		failed atomic.Int32
	)
	for c := range contenders {
		wg.Go(func() {
			<-start
			l := ls[c%len(ls)]
			// Each contender walks the keys from its own offset, so they
			// meet on every key in a different order.
			for j := range keys {
				i := (j + c*len(keys)/contenders) % len(keys)
				_, claimed, err := l.Reserve(ctx(t), keys[i], fpA, long, long)
				if err != nil {
					if failed.Add(1) < 5 {
						t.Errorf("Reserve: %v", err)
					}
					continue
				}
				if claimed {
					claims[i].Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	bad := 0
	for i := range claims {
		if n := claims[i].Load(); n != 1 {
			bad++
			if bad < 5 {
				t.Errorf("key %d: %d claims, want exactly 1", i, n)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys did not have exactly one claim", bad, len(keys))
	}
}
