-- name: InsertPayment :one
INSERT INTO payment (order_id, customer_id, provider, external_payment_id, amount, status)
VALUES ($1, $2, $3, $4, $5, 'authorized')
RETURNING id, order_id, customer_id, provider, external_payment_id, amount::text, status;

-- name: GetPaymentByExternalID :one
SELECT id, order_id, customer_id, provider, external_payment_id, amount::text, status
FROM payment
WHERE provider = $1 AND external_payment_id = $2;

-- name: SettlePayment :one
UPDATE payment SET status = 'settled'
WHERE provider = $1 AND external_payment_id = $2
RETURNING id, amount::text;

-- name: InsertLedgerEntry :exec
INSERT INTO ledger_entry (payment_id, amount) VALUES ($1, $2::numeric);

-- name: CountLedgerEntries :one
SELECT count(*) FROM ledger_entry WHERE payment_id = $1;
