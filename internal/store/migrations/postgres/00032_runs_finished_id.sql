-- +goose Up
-- A windowed listing (sacct, squeue's recently finished jobs) is read a
-- page at a time in id order: its unfinished runs (finished_at = 0) come
-- in that order straight from this index, so each page reads only its own
-- rows instead of every waiting run again.
CREATE INDEX runs_finished_id ON runs (finished_at, id);
DROP INDEX runs_finished;

-- +goose Down
CREATE INDEX runs_finished ON runs (finished_at);
DROP INDEX runs_finished_id;
