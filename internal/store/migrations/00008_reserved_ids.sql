-- +goose Up
-- The highest run and job IDs handed out or about to be (name 'runs' or
-- 'jobs'): written durably before any ID above the last mark is used, so
-- that an ID once acknowledged is never given again, even when the
-- transactions after the mark are lost (a torn WAL tail after a power
-- loss).
CREATE TABLE reserved_ids (
    name TEXT PRIMARY KEY,
    upto INTEGER NOT NULL
);

-- +goose Down
DROP TABLE reserved_ids;
