-- +goose Up
-- A submission's Idempotency-Key, per user, and the run it made: a retry
-- with the same key answers that run instead of making another.
CREATE TABLE idempotency_keys (
    user_id    INTEGER NOT NULL,
    key        TEXT    NOT NULL,
    run_id     INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, key)
);

-- +goose Down
DROP TABLE idempotency_keys;
