-- +goose Up
-- When an active run last mounted each volume (issue 17): auto_cleanup_duration
-- counts from it (Unix nanoseconds; 0: never used, counted from created_at),
-- so a server restart neither restarts the count nor loses it.
ALTER TABLE volumes ADD COLUMN last_used BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE volumes DROP COLUMN last_used;
