-- +goose Up
-- Volumes from `type: volume` (issue 17): the region the provider made the
-- volume in, whether it was registered (volume_id: deleting it forgets the
-- row and keeps the provider's volume) rather than created, and the
-- provider's last error while creating or deleting it, and its
-- auto_cleanup_duration (seconds; 0: kept until deleted). The row is written
-- (state 'creating' or 'deleting') before the provider is asked, so a
-- server killed in between finishes the step at its next start.
ALTER TABLE volumes ADD COLUMN region TEXT NOT NULL DEFAULT '';
ALTER TABLE volumes ADD COLUMN external INTEGER NOT NULL DEFAULT 0;
ALTER TABLE volumes ADD COLUMN detail TEXT NOT NULL DEFAULT '';
ALTER TABLE volumes ADD COLUMN auto_cleanup BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE volumes DROP COLUMN auto_cleanup;
ALTER TABLE volumes DROP COLUMN detail;
ALTER TABLE volumes DROP COLUMN external;
ALTER TABLE volumes DROP COLUMN region;
