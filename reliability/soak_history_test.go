//go:build unix

package reliability_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/reliability/internal/history"
)

// maxSkew is the largest skew of a child's clock the nemesis sets.
const maxSkew = 30 * time.Second

// readFinals reads every key's record from SQL (the children's table,
// directly) and from Redis (through a layer of its own), in the history's
// terms: the answer the record holds, and the meaning of the request
// whose fingerprint it is bound to; and the charges the ledger holds.
func readFinals(t *testing.T, admin *bun.DB, st *stacktest.Stack, rs *testenv.RedisSentinel, ledger string, keys []*soakKey) []history.Final {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows := readRecordRows(ctx, t, admin, "SELECT key_digest, state, fingerprint, result FROM "+st.Records+" WHERE expires_at > clock_timestamp()")
	effects := readLedger(ctx, t, admin, ledger)

	reader := must.Get(redislayer.New(rs.Client(t), redislayer.WithPrefix(st.Prefix), redislayer.WithTimeout(5*time.Second)))(t)
	defer reader.Close()
	fb := must.Get(fingerprint.New())(t)
	at := time.Now().UnixNano()
	finals := make([]history.Final, len(keys))
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex // guards errs
		errs []error
	)
	for range 8 { // Redis answers one key at a time: ask in parallel
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(keys); i = int(next.Add(1)) - 1 {
				k := keys[i]
				key := idem.NewKey("", k.name)
				fps := k.fingerprints(fb)
				f := history.Final{Key: k.name, At: at, Expired: k.route == routeShort, Effects: effects[k.name],
					SQL: history.Stored{State: history.Absent}, Redis: history.Stored{State: history.Absent}}
				d := key.Digest()
				if r, ok := rows[string(d[:])]; ok {
					f.SQL = stored(idem.State(r.state), string(r.fp), r.result, fps)
				}
				rec, err := reader.Get(ctx, key)
				switch {
				case errors.Is(err, idem.ErrNotFound):
				case err != nil:
					mu.Lock()
					errs = append(errs, fmt.Errorf("read %s from Redis: %w", k.name, err))
					mu.Unlock()
				case !rec.Completed() && rec.LeaseUntil.Before(time.Unix(0, at).Add(maxSkew)):
					// Redis keeps a claim for the retention and lets its
					// lease lapse by a mark on its TTL: a claim whose lease
					// has lapsed holds nothing, and the next Reserve takes
					// it over. Its lease end was written by its owner's
					// clock, which may have been skewed.
				default:
					f.Redis = stored(rec.State, rec.Fingerprint, rec.Result, fps)
				}
				finals[i] = f
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return finals
}

// fingerprints maps the fingerprint of each body sent with k, as the
// middleware computes it, to the bodies' meanings.
func (k *soakKey) fingerprints(b *fingerprint.Builder) map[string][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string][]string{}
	for _, body := range k.bodies {
		r := httptest.NewRequest(http.MethodPost, routePath(k.route), bytes.NewReader(body.raw))
		r.Header.Set("Content-Type", "application/json")
		fp, err := b.Request(r)
		if err != nil {
			continue // a body the middleware rejects has no record
		}
		out[fp] = append(out[fp], body.meaning)
	}
	return out
}

// stored turns a record into the history's terms. The fingerprint becomes
// the meaning of the body it is the fingerprint of (of the one the stored
// response says it answered, when the fingerprint does not tell two
// bodies apart); the result becomes the answer it holds (answerBytes).
func stored(state idem.State, fp string, result []byte, fps map[string][]string) history.Stored {
	s := history.Stored{State: history.InProgress}
	status, h, body, ok := storedResponse(result)
	if state == idem.StateCompleted {
		s.State, s.Value = history.Completed, result
		if ok {
			s.Value = answerBytes(status, h, body)
		}
	}
	meanings := fps[fp]
	switch {
	case len(meanings) == 0:
		s.Fingerprint = "fingerprint " + fp + ", of no body the client sent"
	case len(meanings) == 1:
		s.Fingerprint = meanings[0]
	default:
		s.Fingerprint = meanings[0]
		var r receipt
		if ok && json.Unmarshal(body, &r) == nil {
			for _, m := range meanings {
				if m == r.Meaning {
					s.Fingerprint = m
				}
			}
		}
	}
	return s
}

// storedResponse decodes a response as the middleware stores it (version
// 1: version, flags, status, header fields, body; see its codec), or
// returns false for anything else (a tombstone among them).
func storedResponse(b []byte) (status int, h http.Header, body []byte, ok bool) {
	if len(b) < 4 || b[0] != 1 || b[1] != 0 {
		return 0, nil, nil, false
	}
	status = int(binary.BigEndian.Uint16(b[2:4]))
	rest := b[4:]
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return nil, false
		}
		v := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		return v, true
	}
	fields, w := binary.Uvarint(rest)
	if w <= 0 {
		return 0, nil, nil, false
	}
	rest = rest[w:]
	h = http.Header{}
	for range fields {
		name, ok1 := next()
		value, ok2 := next()
		if !ok1 || !ok2 {
			return 0, nil, nil, false
		}
		h.Add(string(name), string(value))
	}
	body, ok = next()
	return status, h, body, ok && len(rest) == 0
}

// readLedger returns, per key, the executions whose charge committed.
func readLedger(ctx context.Context, t *testing.T, admin *bun.DB, ledger string) map[string][]string {
	t.Helper()
	var rows []struct {
		Exec string `bun:"exec"`
		Key  string `bun:"key"`
	}
	if err := admin.NewRaw("SELECT exec, key FROM "+ledger).Scan(ctx, &rows); err != nil {
		t.Fatalf("read the ledger: %v", err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.Key] = append(out[r.Key], r.Exec)
	}
	return out
}

// assemble decodes the recorded files, merges them with the finals, and
// links each call to its own execution.
func assemble(t *testing.T, files []string, finals []history.Final) *history.History {
	t.Helper()
	h := mergeHistory(t, files, finals)
	linkExecutions(h)
	return h
}

// linkExecutions marks the calls whose own handler ran: the client
// recorded a 201 as Replayed, not knowing whose run answered it; a call
// an execution names, which had started by the call's return, ran it.
// Such a call that succeeded is Executed; one answered in-flight was an
// owner whose lease another took over (the middleware answers a lost
// lease 409, as it does a duplicate that waited in vain).
func linkExecutions(h *history.History) {
	byCall := make(map[string]*history.Execution, len(h.Execs))
	for i := range h.Execs {
		e := &h.Execs[i]
		if prev := byCall[e.Call]; prev == nil || e.Start > prev.Start {
			byCall[e.Call] = e
		}
	}
	for i := range h.Calls {
		c := &h.Calls[i]
		e := byCall[c.ID]
		if e == nil || (c.Return != 0 && e.Start > c.Return) {
			continue
		}
		c.Exec = e.ID
		switch c.Outcome {
		case history.Replayed:
			c.Outcome = history.Executed
		case history.InFlight:
			c.Outcome = history.LeaseLost
		}
	}
}

// timeline renders what the history holds of key, in time order: at most
// max lines, times relative to the key's first event.
func timeline(h *history.History, key string, max int) string {
	type line struct {
		at   int64
		text string
	}
	var lines []line
	for _, c := range h.Calls {
		if c.Key != key {
			continue
		}
		lines = append(lines, line{c.Invoke, fmt.Sprintf("%s on %s invoked (fp %s)", c.ID, c.Node, c.Fingerprint)})
		if c.Return != 0 {
			lines = append(lines, line{c.Return, fmt.Sprintf("%s returned %s %.60q %s exec=%s", c.ID, c.Outcome, c.Value, c.Err, c.Exec)})
		}
	}
	for _, e := range h.Execs {
		if e.Key != key {
			continue
		}
		lines = append(lines, line{e.Start, fmt.Sprintf("%s on %s started for %s", e.ID, e.Node, e.Call)})
		if e.Canceled != 0 {
			lines = append(lines, line{e.Canceled, fmt.Sprintf("%s cancelled: %s (lease lost %v)", e.ID, e.Cause, e.LeaseLost)})
		}
		if e.End != 0 {
			lines = append(lines, line{e.End, fmt.Sprintf("%s ended %s failed=%v %s", e.ID, e.Ending, e.Failed, e.Err)})
		}
		if e.Completion != history.CompletionUnknown {
			lines = append(lines, line{e.Completed, fmt.Sprintf("%s completion %s", e.ID, e.Completion)})
		}
	}
	for _, f := range h.Finals {
		if f.Key == key {
			lines = append(lines, line{f.At, fmt.Sprintf("final: sql %s %.60q, redis %s %.60q, expired %v", f.SQL.State, f.SQL.Value, f.Redis.State, f.Redis.Value, f.Expired)})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	first := lines[0].at
	for i, l := range lines {
		if i == max {
			fmt.Fprintf(&b, "  … %d more\n", len(lines)-max)
			break
		}
		var faults []string
		for _, f := range h.Faults {
			if f.Kind == history.SlowWork || f.Kind == history.WorkError || f.Kind == history.WorkPanic {
				continue
			}
			if f.Start <= l.at && (f.End == 0 || f.End >= l.at) {
				faults = append(faults, string(f.Kind)+"@"+f.Node)
			}
		}
		fmt.Fprintf(&b, "  +%-8v %s", time.Duration(l.at-first).Round(time.Millisecond), l.text)
		if len(faults) > 0 {
			fmt.Fprintf(&b, "  [during %s]", strings.Join(faults, " "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// keep writes the merged history to path, for a look after the run.
func keep(t *testing.T, h *history.History, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Errorf("keep the history: %v", err)
		return
	}
	defer f.Close()
	if err := h.Encode(f); err != nil {
		t.Errorf("keep the history: %v", err)
		return
	}
	t.Logf("history kept in %s", path)
}

// otherErrors lists the n commonest error texts of the calls that ended
// with an error the client could not classify, with their counts.
func otherErrors(h *history.History, n int) string {
	count := map[string]int{}
	for _, c := range h.Calls {
		if c.Outcome == history.OtherError {
			e := c.Err
			if i := strings.LastIndex(e, ": "); i >= 0 { // drop addresses and ports
				e = e[i+2:]
			}
			count[e]++
		}
	}
	texts := slices.Collect(maps.Keys(count))
	slices.SortFunc(texts, func(a, b string) int { return cmp.Or(cmp.Compare(count[b], count[a]), strings.Compare(a, b)) })
	var parts []string
	for _, e := range texts[:min(n, len(texts))] {
		parts = append(parts, fmt.Sprintf("%dx %q", count[e], e))
	}
	return strings.Join(parts, ", ")
}

// dbNow returns the database's clock.
func dbNow(t *testing.T, admin *bun.DB) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var now time.Time
	if err := admin.NewRaw("SELECT clock_timestamp()").Scan(ctx, &now); err != nil {
		t.Fatalf("read the database's clock: %v", err)
	}
	return now
}

// abandonedBound is how long a transaction whose connection a black hole
// cut may stay open: pgx gives up on such a connection 15 s after its
// context ended (the cancel request it sends first is swallowed too), and
// only then closes it, which ends the transaction on the server.
const abandonedBound = 30 * time.Second

// awaitAbandoned waits until no transaction of the children's sessions
// (application_name apps*) that began before since, by the database's
// clock, is still open, and returns how long it waited. Once the children
// are idle, such a transaction is one whose connection a black hole cut
// while its client gave up: the server keeps it, and its row locks, until
// the client's driver closes the connection. Meanwhile every call on its
// key waits out its lock bound and answers 503, as it would in production
// (docs/failures.md); the quiet round starts after, so that it decides
// every key. It returns 0 when none was open; one still open past
// abandonedBound is an error.
func awaitAbandoned(t *testing.T, admin *bun.DB, apps string, since time.Time) time.Duration {
	t.Helper()
	began := time.Now()
	for polls := 0; ; polls++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var open []string
		err := admin.NewRaw("SELECT application_name || ' (' || coalesce(state, 'no state') || ' since ' || xact_start || ')' FROM pg_stat_activity WHERE application_name LIKE ? AND xact_start < ?",
			apps+"%", since).Scan(ctx, &open)
		cancel()
		switch {
		case err != nil:
			t.Fatalf("read the children's sessions: %v", err)
		case len(open) == 0 && polls == 0:
			return 0
		case len(open) == 0:
			return time.Since(began)
		case time.Since(began) > abandonedBound:
			t.Errorf("transactions from before the faults ended still open after %v: %s", abandonedBound, strings.Join(open, "; "))
			return time.Since(began)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// recordRow is a record's row as the finals read it.
type recordRow struct {
	state  int64
	fp     []byte
	result []byte
}

// readRecordRows runs query, which selects key_digest, state, fingerprint
// and result, and returns the rows by digest.
func readRecordRows(ctx context.Context, t *testing.T, admin *bun.DB, query string) map[string]recordRow {
	t.Helper()
	rows := map[string]recordRow{}
	q, err := admin.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("read the records: %v", err)
	}
	defer q.Close()
	for q.Next() {
		var d []byte
		var r recordRow
		if err := q.Scan(&d, &r.state, &r.fp, &r.result); err != nil {
			t.Fatalf("read the records: %v", err)
		}
		rows[string(d)] = r
	}
	if err := q.Err(); err != nil {
		t.Fatalf("read the records: %v", err)
	}
	return rows
}
