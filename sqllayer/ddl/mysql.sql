-- idem SQL tier (package sqllayer): schema for MySQL 8 and MariaDB 10.5+.
-- Layer.Init runs exactly these statements; run them yourself instead when
-- you manage migrations. Times are DATETIME(6) in UTC, compared with
-- UTC_TIMESTAMP(6). Keys, tokens, fingerprints and IDs are binary strings so
-- that they compare byte for byte, whatever the default collation; scope and
-- client_key are labels for operators (cut to 255 bytes).

CREATE TABLE IF NOT EXISTS idempotency_records (
    key_digest  BINARY(32)      NOT NULL,
    scope       VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    client_key  VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fingerprint VARBINARY(1024) NOT NULL,
    state       TINYINT         NOT NULL,
    token       VARBINARY(64)   NOT NULL,
    result      LONGBLOB,
    lease_until DATETIME(6),
    created_at  DATETIME(6)     NOT NULL,
    expires_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (key_digest),
    KEY idempotency_records_expires_at_idx (expires_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS processed_events (
    consumer    VARBINARY(255)  NOT NULL,
    event_id    VARBINARY(255)  NOT NULL,
    created_at  DATETIME(6)     NOT NULL,
    expires_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (consumer, event_id),
    KEY processed_events_expires_at_idx (expires_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS sync_versions (
    source      VARBINARY(255)  NOT NULL,
    external_id VARBINARY(255)  NOT NULL,
    version     BIGINT          NOT NULL,
    updated_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (source, external_id)
) ENGINE = InnoDB;
