-- +goose Up
-- The scheduler's estimate of when a waiting run starts (0: none).
ALTER TABLE runs ADD COLUMN estimated_start BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE runs DROP COLUMN estimated_start;
