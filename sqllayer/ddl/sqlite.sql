-- idem SQL tier (package sqllayer): schema for SQLite 3.42+.
-- Layer.Init runs exactly these statements; run them yourself instead when
-- you manage migrations. Times are INTEGER microseconds since the Unix epoch
-- (UTC), compared with SQLite's own clock. Keys, fingerprints and tokens are
-- blobs; scope and client_key are labels for operators (cut to 255 bytes).

CREATE TABLE IF NOT EXISTS idempotency_records (
    key_digest  BLOB    PRIMARY KEY NOT NULL,
    scope       TEXT    NOT NULL,
    client_key  TEXT    NOT NULL,
    fingerprint BLOB    NOT NULL,
    state       INTEGER NOT NULL,
    token       BLOB    NOT NULL,
    result      BLOB,
    lease_until INTEGER,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx ON idempotency_records (expires_at);

CREATE TABLE IF NOT EXISTS processed_events (
    consumer    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (consumer, event_id)
);

CREATE INDEX IF NOT EXISTS processed_events_expires_at_idx ON processed_events (expires_at);

CREATE TABLE IF NOT EXISTS sync_versions (
    source      TEXT    NOT NULL,
    external_id TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (source, external_id)
);
