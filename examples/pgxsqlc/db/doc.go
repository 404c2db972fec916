// Package db is the payments team's data access, in the shape sqlc
// generates for pgx v5 (sqlc.yaml, query.sql and schema.sql beside it): a
// Queries over a DBTX, which a *pgxpool.Pool and a pgx.Tx both are, and
// WithTx to run the same queries in a transaction. It knows nothing of
// idem.
package db
