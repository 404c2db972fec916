// Package idempgx runs idem's SQL tier and its in-transaction APIs on pgx
// v5's own types: a *pgxpool.Pool and a pgx.Tx, for teams whose code (sqlc
// in its pgx mode, or pgx by hand) knows no database/sql and no bun.
//
//	pool, err := pgxpool.New(ctx, dsn)
//	…
//	sql, err := idempgx.New(pool) // the SQL tier, on the team's pool
//	…
//	store, err := tiered.New(tiered.WithSQL(sql), tiered.WithRedis(redis))
//
// New builds the tier over the pool itself: its statements borrow the
// pool's connections, as the team's own do, and no second pool exists.
//
// # idem's record in the team's pgx.Tx
//
// Every in-transaction API of sqllayer takes a sqllayer.Tx; Layer.Tx
// adapts a pgx.Tx to it, so that sqlc's generated queries and idem's row
// commit in one pgx.Tx:
//
//	tx, err := pool.Begin(ctx)
//	…
//	defer tx.Rollback(ctx)
//	if _, err := queries.WithTx(tx).InsertPayment(ctx, params); err != nil {
//		return err
//	}
//	res, _ := idem.ReservationFrom(ctx)
//	if err := sql.CompleteReservation(ctx, sql.Tx(tx), res, nil); err != nil {
//		return err
//	}
//	return tx.Commit(ctx)
//
// The same adapter serves MarkProcessed and MarkProcessedBatch (a queue
// consumer's processed event beside its business update), AdvanceVersion
// and Version (sync jobs), and idemwatermill.Complete. Layer.InTx begins,
// marks, runs and commits in one call, as sqllayer's InTx does with bun.
//
// # The atomic mode
//
// A tiered.Store made WithAtomic over a Layer of this package hands its
// function the execution's transaction as a pgx.Tx: TxFrom returns it. The
// function's queries, the claim and the completion commit in one COMMIT,
// which the Store sends; the pgx.Tx refuses Commit and Rollback, and its
// Begin opens a savepoint.
//
// # Mistakes it refuses
//
// Layer.Tx refuses, before anything is written, a transaction of another
// database than the tier's pool (compared by host, port, database and
// user, with no round trip) and one that has already been committed or
// rolled back; a transaction Postgres has aborted (a statement in it
// failed) gives an error that says so. All wrap idem.ErrConfig.
package idempgx
