-- +goose Up
-- The most memory a job's processes held at once (bytes; 0: unknown), as
-- its cgroup's peak when it ended: sacct's MaxRSS.
ALTER TABLE jobs ADD COLUMN max_rss BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE jobs DROP COLUMN max_rss;
