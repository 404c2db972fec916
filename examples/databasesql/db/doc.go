// Package db is the payments team's data access, in the shape sqlc
// generates in its database/sql mode (query.sql and schema.sql beside it):
// a Queries over a DBTX, which a *sql.DB and a *sql.Tx both are, and
// WithTx to run the same queries in a transaction. It knows nothing of
// idem.
package db
