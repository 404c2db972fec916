-- schema.sql for the embedded SQLite the example falls back to when no
-- Postgres is at hand: the same tables and the same unique key.

CREATE TABLE payment (
    id                  INTEGER PRIMARY KEY,
    order_id            TEXT    NOT NULL,
    customer_id         TEXT    NOT NULL,
    provider            TEXT    NOT NULL,
    external_payment_id TEXT    NOT NULL,
    amount              NUMERIC NOT NULL,
    status              TEXT    NOT NULL,
    created_at          TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    UNIQUE (provider, external_payment_id)
);

CREATE TABLE ledger_entry (
    id         INTEGER PRIMARY KEY,
    payment_id INTEGER NOT NULL REFERENCES payment (id),
    amount     NUMERIC NOT NULL,
    created_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
);
