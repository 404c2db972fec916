-- The tables of the payments team, as its migrations create them (the
-- payment table is the team's own, with its second protection for money:
-- UNIQUE (provider, external_payment_id)). idem's own tables are created by
-- its Init, or by applying sqllayer.DDL in the same migrations.

CREATE TABLE payment (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id            uuid          NOT NULL,
    customer_id         uuid          NOT NULL,
    provider            text          NOT NULL,
    external_payment_id text          NOT NULL,
    amount              numeric(19,4) NOT NULL,
    status              text          NOT NULL,
    created_at          timestamptz   NOT NULL DEFAULT now(),
    UNIQUE (provider, external_payment_id)
);

-- What the settlement consumer writes: one row per settled payment event,
-- an effect that a second run of the same event would duplicate.
CREATE TABLE ledger_entry (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id bigint        NOT NULL REFERENCES payment (id),
    amount     numeric(19,4) NOT NULL,
    created_at timestamptz   NOT NULL DEFAULT now()
);
