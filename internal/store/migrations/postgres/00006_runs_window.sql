-- +goose Up
-- The listing's time window (sacct -S/-E, squeue's recently finished
-- jobs) reads runs by when they ended and when they were submitted,
-- without scanning the whole history.
CREATE INDEX runs_finished ON runs (finished_at);
CREATE INDEX runs_submitted ON runs (submitted_at);

-- +goose Down
DROP INDEX runs_submitted;
DROP INDEX runs_finished;
