-- +goose Up
-- Arrays and scheduled runs: a task of an array points at its array (the
-- array's own run record) and carries its index; meta is the server's JSON
-- state of an array (tasks created so far, throttle, cancelled indices) or
-- of a scheduled run (its last tick).
ALTER TABLE runs ADD COLUMN array_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN array_index INTEGER NOT NULL DEFAULT -1;
ALTER TABLE runs ADD COLUMN meta TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_array ON runs (array_id, array_index);

-- +goose Down
DROP INDEX runs_array;
ALTER TABLE runs DROP COLUMN meta;
ALTER TABLE runs DROP COLUMN array_index;
ALTER TABLE runs DROP COLUMN array_id;
