-- +goose Up
-- A submission's Idempotency-Key, per user, and the run it made. The
-- server remembers the recent ones and reads them back at a start (by
-- time: keys are random, and an index of them would be written all over
-- at each submission); it tells a second submission apart itself.
CREATE TABLE idempotency_keys (
    created_at BIGINT  NOT NULL,
    user_id    BIGINT  NOT NULL,
    key        TEXT    NOT NULL,
    run_id     BIGINT  NOT NULL
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
