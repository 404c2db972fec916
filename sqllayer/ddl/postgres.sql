-- idem SQL tier (package sqllayer): schema for PostgreSQL.
-- Layer.Init runs exactly these statements; run them yourself instead when
-- you manage migrations. Times are timestamptz, compared with the server's
-- clock. Keys, fingerprints and tokens are bytes; scope and client_key are
-- labels for operators (cut to 255 bytes).

CREATE TABLE IF NOT EXISTS idempotency_records (
    key_digest  bytea       PRIMARY KEY,
    scope       text        NOT NULL,
    client_key  text        NOT NULL,
    fingerprint bytea       NOT NULL,
    state       smallint    NOT NULL,
    token       bytea       NOT NULL,
    result      bytea,
    lease_until timestamptz,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx ON idempotency_records (expires_at);

CREATE TABLE IF NOT EXISTS processed_events (
    consumer    text        NOT NULL,
    event_id    text        NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (consumer, event_id)
);

CREATE INDEX IF NOT EXISTS processed_events_expires_at_idx ON processed_events (expires_at);

CREATE TABLE IF NOT EXISTS sync_versions (
    source      text        NOT NULL,
    external_id text        NOT NULL,
    version     bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (source, external_id)
);
