package sqllayer

import (
	"context"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// pgLayer returns a Layer with fresh tables on the real Postgres, dropped
// when the test ends, and its pool.
func pgLayer(t *testing.T, opts ...Option) (*Layer, *bun.DB) {
	t.Helper()
	db := testenv.Postgres(t).Open(t)
	db.SetMaxOpenConns(4)
	names := []string{testenv.Name("idem_rec"), testenv.Name("idem_evt"), testenv.Name("idem_ver")}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, n := range names {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+n); err != nil {
				t.Errorf("drop %s: %v", n, err)
			}
		}
	})
	opts = append([]Option{WithRecordsTable(names[0]), WithEventsTable(names[1]), WithVersionsTable(names[2])}, opts...)
	l, err := New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l, db
}

func TestArrayTextForms(t *testing.T) {
	for _, c := range []struct {
		name string
		v    driver.Valuer
		want string
	}{
		{"bytea", byteaArray{{}, {0}, {0xff, '"', '\\'}}, `{"\\x","\\x00","\\xff225c"}`},
		{"text", textArray{"", `a"b`, `c\d`, "NULL", "{,}", "é"}, `{"","a\"b","c\\d","NULL","{,}","é"}`},
		{"int8", int8Array{0, -1, 9007199254740993}, `{0,-1,9007199254740993}`},
		{"empty", textArray{}, `{}`},
	} {
		got, err := c.v.Value()
		if err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %s", c.name, got, err, c.want)
		}
	}
}

// TestArrayTextFormsOnPostgres: the text forms, which drivers that do not
// bind slices send, are the arrays pgx sends as slices.
func TestArrayTextFormsOnPostgres(t *testing.T) {
	db := testenv.Postgres(t).Open(t)
	bs := [][]byte{{}, {0}, {0xff, '"', '\\', ','}, []byte("{}")}
	ss := []string{"", `a"b`, `c\d`, "NULL", "{,}", "é", " x "}
	is := []int64{0, -1, 9007199254740993}
	var same bool
	err := db.DB.QueryRowContext(t.Context(), "SELECT $1::bytea[] = $2::bytea[] AND $3::text[] = $4::text[] AND $5::bigint[] = $6::bigint[]",
		byteaArray(bs), bs, textArray(ss), ss, int8Array(is), is).Scan(&same)
	if err != nil || !same {
		t.Fatalf("text forms differ from the slices: %v %v", same, err)
	}
}

// TestPostgresBatchPlansLookUpEachKey: the generic plan of every batched
// statement that reads or changes existing rows finds them by key, even
// when the plan is made on a small table that has never been analysed: a
// plan that scanned the table would stay cached while the table grows.
func TestPostgresBatchPlansLookUpEachKey(t *testing.T) {
	l, db := pgLayer(t, WithBatchSize(64))
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	dollar := regexp.MustCompile(`\$(\d+)`)
	for name, q := range map[string]string{
		"readMany": l.bst.readMany.get(8), "complete": l.bst.complete.get(8),
		"mark": l.bst.mark.get(8), "revive": l.bst.revive.get(8), "claimAndComplete": l.bst.claimAndComplete.get(8),
	} {
		params := 0
		for _, m := range dollar.FindAllStringSubmatch(q, -1) {
			n, _ := strconv.Atoi(m[1])
			params = max(params, n)
		}
		stmt := "p_" + name
		if _, err := conn.ExecContext(t.Context(), "PREPARE "+stmt+" AS "+q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows, err := conn.QueryContext(t.Context(), "EXPLAIN EXECUTE "+stmt+"("+strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")+")")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if p := plan.String(); strings.Contains(p, "Seq Scan") || strings.Contains(p, "expires_at_idx") {
			t.Errorf("%s: the generic plan does not look each key up:\n%s", name, p)
		}
	}
}

// TestBatchesInTextForm runs batched claims, completions and events through
// the arrays' text forms, as a driver that does not bind slices would.
func TestBatchesInTextForm(t *testing.T) {
	l, db := pgLayer(t, WithBatchSize(64))
	if !l.slices {
		t.Fatal("pgx binds slices; the test wants to turn that off")
	}
	l.slices = false
	ctx := t.Context()
	cs := make([]*claim, 5)
	for i := range cs {
		k := idem.NewKey(`sc"o\pe`, fmt.Sprint(`cl"ient\`, i))
		d := k.Digest()
		cs[i] = &claim{key: k, digest: d[:], scope: l.text(label(k.Scope())), client: l.text(label(k.ClientKey())),
			fp: []byte("fp"), lease: micros(time.Hour), expiry: micros(time.Hour)}
	}
	outs := l.reserveMany(ctx, cs)
	comps := make([]*completion, len(cs))
	for i, o := range outs {
		if o.err != nil || o.again || !o.claimed {
			t.Fatalf("claim %d: %+v", i, o)
		}
		comps[i] = &completion{key: cs[i].key, digest: cs[i].digest, token: bin(o.rec.Token), result: []byte{byte(i), '"', '\\'}, ttl: micros(time.Hour)}
	}
	for i, o := range l.completeMany(ctx, comps) {
		if o.err != nil || o.again {
			t.Fatalf("completion %d: %+v", i, o)
		}
	}
	for i, c := range cs {
		r, err := l.Get(ctx, c.key)
		if err != nil || !r.Completed() || string(r.Result) != string(comps[i].result) {
			t.Fatalf("key %d after the batch: %+v %v", i, r, err)
		}
	}
	// Repeats read the rows back in text form too.
	for i, o := range l.reserveMany(ctx, cs) {
		if o.err != nil || o.again || o.claimed || !o.rec.Completed() {
			t.Fatalf("repeat %d: %+v", i, o)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ids := []string{`a"b`, `c\d`, "NULL", "{,}"}
	for round, want := range []string{"[false false false false]", "[true true true true]"} {
		dups, err := l.MarkProcessedBatch(ctx, tx, "consumer", ids)
		if err != nil || fmt.Sprint(dups) != want {
			t.Fatalf("round %d: %v %v, want %s", round, dups, err, want)
		}
	}
}
