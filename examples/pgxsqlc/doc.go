// Command pgxsqlc is a payments service on pgx v5, sqlc and chi that makes
// retried work happen once with idem, with no bun and no second SQL
// driver in its own code: the runnable example of the "pgx and sqlc"
// guide (docs/pgx.md in the repository).
//
// POST /payments runs behind idem's middleware, scoped by the account the
// authentication middleware puts in the request's context. The handler
// inserts the payment with sqlc's queries in a pgx.Tx and completes idem's
// reservation in the same transaction; the payment's own unique key
// (provider, external_payment_id) is the second protection, hit under a
// savepoint so that the transaction goes on and answers with the payment
// that exists. The settlement consumer marks its event processed in the
// pgx.Tx of its business update.
//
// Run it with DATABASE_URL naming a Postgres database:
//
//	DATABASE_URL=postgres://user@host:5432/db go run .
package main
