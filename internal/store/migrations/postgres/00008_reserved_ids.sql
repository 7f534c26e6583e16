-- +goose Up
-- The highest run and job IDs handed out or about to be (name 'runs' or
-- 'jobs'): written before any ID above the last mark is used, so that an
-- ID once acknowledged is never given again. (On PostgreSQL every commit
-- is durable when it returns; the table keeps the same meaning.)
CREATE TABLE reserved_ids (
    name TEXT PRIMARY KEY,
    upto BIGINT NOT NULL
);

-- +goose Down
DROP TABLE reserved_ids;
