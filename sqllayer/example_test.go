package sqllayer_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The life of one idempotent operation on the embedded default, SQLite.
func Example() {
	ctx := context.Background()
	// An in-memory database belongs to its connection, so the pool keeps
	// exactly one; a file database, with _pragma=journal_mode(WAL) added to
	// the DSN, needs no such limit.
	sqldb, err := sql.Open("sqlite", "file:example?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()

	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	key := idem.NewKey("tenant-42", "order-1001")

	rec, claimed, err := layer.Reserve(ctx, key, "fp-1", 30*time.Second, 24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first request claims the key:", claimed)
	// … the payment runs, then its result is stored under the owner's token:
	if err := layer.Complete(ctx, key, rec.Token, []byte("charged 42.00"), 24*time.Hour); err != nil {
		log.Fatal(err)
	}

	again, claimed, _ := layer.Reserve(ctx, key, "fp-1", 30*time.Second, 24*time.Hour)
	fmt.Printf("a retry claims: %v, replays %q\n", claimed, again.Result)

	other, _, _ := layer.Reserve(ctx, key, "fp-2", 30*time.Second, 24*time.Hour)
	fmt.Println("another request under the key is a mismatch:", other.Fingerprint != "fp-2")

	err = layer.Complete(ctx, key, "a stale token", []byte("charged twice"), 24*time.Hour)
	fmt.Println("a stale owner:", errors.Is(err, idem.ErrLeaseLost))
	// Output:
	// first request claims the key: true
	// a retry claims: false, replays "charged 42.00"
	// another request under the key is a mismatch: true
	// a stale owner: true
}

// A queue consumer: the processed-event row and the handler's writes commit
// in one transaction, so a redelivered message is skipped and a failed
// handler leaves nothing behind.
func ExampleLayer_InTx() {
	ctx := context.Background()
	// An in-memory database belongs to its connection, so the pool keeps
	// exactly one; a file database, with _pragma=journal_mode(WAL) added to
	// the DSN, needs no such limit.
	sqldb, err := sql.Open("sqlite", "file:example_intx?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE shipments (order_id TEXT)"); err != nil {
		log.Fatal(err)
	}

	handle := func(eventID, orderID string) {
		dup, err := layer.InTx(ctx, "shipping", eventID, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id) VALUES (?)", orderID)
			return err
		})
		fmt.Printf("event %s: duplicate=%v err=%v\n", eventID, dup, err)
	}
	handle("evt-1", "order-7")
	handle("evt-1", "order-7") // redelivered

	var n int
	if err := db.NewRaw("SELECT count(*) FROM shipments").Scan(ctx, &n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shipments:", n)
	// Output:
	// event evt-1: duplicate=false err=<nil>
	// event evt-1: duplicate=true err=<nil>
	// shipments: 1
}

// An HTTP handler whose completion commits with its own writes.
func ExampleLayer_CompleteTx() {
	ctx := context.Background()
	// An in-memory database belongs to its connection, so the pool keeps
	// exactly one; a file database, with _pragma=journal_mode(WAL) added to
	// the DSN, needs no such limit.
	sqldb, err := sql.Open("sqlite", "file:example_completetx?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT)"); err != nil {
		log.Fatal(err)
	}
	key := idem.NewKey("tenant-42", "create-order-9")
	rec, _, err := layer.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	err = layer.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", "order-9"); err != nil {
			return err
		}
		return layer.CompleteTx(ctx, tx, key, rec.Token, []byte(`{"status":201}`), 24*time.Hour)
	})
	if err != nil {
		log.Fatal(err)
	}
	stored, _ := layer.Get(ctx, key)
	fmt.Printf("%s %s\n", stored.State, stored.Result)
	// Output:
	// completed {"status":201}
}

// A sync job applies an external record's change only when its version is
// newer than the one applied before.
func ExampleLayer_AdvanceVersion() {
	ctx := context.Background()
	// An in-memory database belongs to its connection, so the pool keeps
	// exactly one; a file database, with _pragma=journal_mode(WAL) added to
	// the DSN, needs no such limit.
	sqldb, err := sql.Open("sqlite", "file:example_versions?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	for _, v := range []int64{17, 16, 17, 18} { // as the webhooks arrived
		err := layer.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			newer, err := layer.AdvanceVersion(ctx, tx, "crm", "contact-5", v)
			if err != nil {
				return err
			}
			fmt.Printf("version %d: apply=%v\n", v, newer)
			// if newer { … apply the change with tx … }
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// version 17: apply=true
	// version 16: apply=false
	// version 17: apply=false
	// version 18: apply=true
}

// Postgres through pgx, with a table name of the service's own.
// connect_timeout bounds each new connection: database/sql opens them one at
// a time, so a server that accepts a connection and never answers would
// otherwise stall every later one.
func ExampleNew_postgres() {
	sqldb, err := sql.Open("pgx", "postgres://app@db.internal:5432/billing?connect_timeout=2")
	if err != nil {
		log.Fatal(err)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db, sqllayer.WithRecordsTable("billing_idempotency"))
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// The migration to apply with your own tool, for each dialect.
func ExampleDDL() {
	for _, d := range []dialect.Name{dialect.PG, dialect.MySQL, dialect.SQLite} {
		ddl, err := sqllayer.DDL(d)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d tables\n", d, strings.Count(ddl, "CREATE TABLE"))
	}
	// Output:
	// pg: 3 tables
	// mysql: 3 tables
	// sqlite: 3 tables
}

// A queue consumer behind a Store completes its reservation in the
// transaction of its business write: a redelivery after the commit replays,
// and never writes again.
func ExampleLayer_CompleteReservation() {
	ctx := context.Background()
	// An in-memory database belongs to its connection, so the pool keeps
	// exactly one; a file database, with _pragma=journal_mode(WAL) added to
	// the DSN, needs no such limit.
	sqldb, err := sql.Open("sqlite", "file:example_reservation?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE shipments (order_id TEXT)"); err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(layer))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	consume := func(msgID, orderID string) {
		res, err := store.Do(ctx, idem.NewKey("shipping", msgID), "ship", func(ctx context.Context) ([]byte, error) {
			reservation, _ := idem.ReservationFrom(ctx)
			result := []byte("shipped " + orderID)
			return result, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id) VALUES (?)", orderID); err != nil {
					return err
				}
				return layer.CompleteReservation(ctx, tx, reservation, result)
			})
		})
		fmt.Printf("%s: %q replayed=%v err=%v\n", msgID, res.Value, res.Replayed, err)
	}
	consume("msg-1", "order-7")
	consume("msg-1", "order-7") // redelivered

	var n int
	if err := db.NewRaw("SELECT count(*) FROM shipments").Scan(ctx, &n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shipments:", n)
	// Output:
	// msg-1: "shipped order-7" replayed=false err=<nil>
	// msg-1: "shipped order-7" replayed=true err=<nil>
	// shipments: 1
}
