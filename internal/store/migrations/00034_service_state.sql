-- +goose Up
-- The state of a service's autoscaler and crash-loop backoff (issue 16),
-- so that a restart of the server neither scales a busy service down at
-- once nor starts a crash-looping one's backoff again: scaled_at is the
-- last scaling event (Unix ns; the scale delays count from it), fails the
-- replicas that ended by themselves in a row, not_before when the next
-- replica may be submitted (Unix ns; 0: at once), ends_seen the time up
-- to which replicas' ends are counted in fails (Unix ns: a replica that
-- ended later, while the server was down, is counted at its start). An
-- apply resets fails and not_before, and sets ends_seen.
ALTER TABLE services ADD COLUMN scaled_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE services ADD COLUMN fails INTEGER NOT NULL DEFAULT 0;
ALTER TABLE services ADD COLUMN not_before BIGINT NOT NULL DEFAULT 0;
ALTER TABLE services ADD COLUMN ends_seen BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE services DROP COLUMN ends_seen;
ALTER TABLE services DROP COLUMN not_before;
ALTER TABLE services DROP COLUMN fails;
ALTER TABLE services DROP COLUMN scaled_at;
