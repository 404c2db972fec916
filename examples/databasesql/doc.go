// Command databasesql is a payments service on database/sql — sqlc's
// database/sql mode over pgx's stdlib driver, and chi — that makes retried
// work happen once with idem: the runnable example of the "database/sql:
// sqlc, sqlx, gorm" guide (docs/databasesql.md in the repository).
//
// POST /payments runs behind idem's middleware, scoped by the account the
// authentication middleware puts in the request's context. The handler
// inserts the payment with sqlc's queries in a *sql.Tx and completes
// idem's reservation in the same transaction; the payment's own unique key
// (provider, external_payment_id) is hit under a savepoint, so that the
// transaction goes on and answers with the payment that exists. The
// settlement consumer marks its event processed in the *sql.Tx of its
// business update. The same code runs on an embedded SQLite database.
//
// Run it with DATABASE_URL naming a Postgres database:
//
//	DATABASE_URL=postgres://user@host:5432/db go run .
package main
