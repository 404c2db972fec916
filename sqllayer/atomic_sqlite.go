package sqllayer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/uptrace/bun"
)

// SQLite's one writer. A claim that waits for it cannot tell the key's
// lock from the database's: another key's execution may hold it, and a
// key no one holds is not in flight. What this process knows, it uses:
// the atomic executions of every Layer of the process that hold a key in
// their open transaction are counted here, by database (its file, or the
// pool for a database in memory, which one pool holds) and key. A claim
// of a key counted here waits for the writer no longer than the Store's
// wait and answers idem.ErrInFlight; any other waits for the wait and the
// SQL timeout together and answers idem.ErrUnavailable (see claimOnce).

// sqliteHolds counts the executions that hold each key, by sqliteHold.
var sqliteHolds sync.Map // sqliteHold -> *atomic.Int64

// sqliteHold is one key of one SQLite database.
type sqliteHold struct {
	db  string // "file:" and its path, or "pool:" and the pool's address
	key string // the key's digest
}

// sqliteDBs returns the names of the layer's database this process counts
// holds under: its pool always, its file once a connection told it (see
// sqliteFile).
func (l *Layer) sqliteDBs() []string {
	dbs := []string{fmt.Sprintf("pool:%p", l.db.DB)}
	if f, _ := l.file.Load().(string); f != "" {
		dbs = append(dbs, "file:"+f)
	}
	return dbs
}

// sqliteFile learns, once, the file of the layer's main database from
// conn ("" for one in memory).
func (l *Layer) sqliteFile(ctx context.Context, conn bun.Conn) error {
	if _, ok := l.file.Load().(string); ok {
		return nil
	}
	rows, err := conn.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return err
	}
	defer rows.Close()
	file := ""
	for rows.Next() {
		var (
			seq        int64
			name, path string
		)
		if err := rows.Scan(&seq, &name, &path); err != nil {
			return err
		}
		if name == "main" {
			file = path
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l.file.Store(file)
	return nil
}

// sqliteHeld reports whether an atomic execution of this process holds
// digest in its open transaction on the layer's database.
func (l *Layer) sqliteHeld(digest []byte) bool {
	for _, db := range l.sqliteDBs() {
		if n, ok := sqliteHolds.Load(sqliteHold{db, string(digest)}); ok && n.(*atomic.Int64).Load() > 0 {
			return true
		}
	}
	return false
}

// sqliteHoldKey counts an execution's hold of digest, and returns the
// function that ends it.
func (l *Layer) sqliteHoldKey(digest []byte) (release func()) {
	dbs := l.sqliteDBs()
	var held []*atomic.Int64
	for _, db := range dbs {
		v, _ := sqliteHolds.LoadOrStore(sqliteHold{db, string(digest)}, new(atomic.Int64))
		n := v.(*atomic.Int64)
		n.Add(1)
		held = append(held, n)
	}
	return func() {
		for i, n := range held {
			if n.Add(-1) == 0 {
				// A hold counted meanwhile on the entry deleted here goes
				// unseen: its duplicates wait as for a key no one holds,
				// and answer idem.ErrUnavailable, never wrongly in flight.
				sqliteHolds.CompareAndDelete(sqliteHold{dbs[i], string(digest)}, n)
			}
		}
	}
}
