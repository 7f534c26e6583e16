-- +goose Up
-- Arrays and schedules are their records (issue 12): what listed them as
-- runs (name, status, reason, priority, spec, times, stop request, meta)
-- moves from their run rows into the records, and the run rows go. The
-- readers of runs (GetRun, ListRuns, FindRun, FindActiveRun) answer an
-- array's or a schedule's ID from its record in a run's shape; IDs stay
-- in the runs' ID space (an array's ID is Slurm's array job ID).
ALTER TABLE arrays ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE arrays ADD COLUMN status TEXT NOT NULL DEFAULT '';
ALTER TABLE arrays ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE arrays ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE arrays ADD COLUMN spec TEXT NOT NULL DEFAULT '';
ALTER TABLE arrays ADD COLUMN submitted_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE arrays ADD COLUMN started_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE arrays ADD COLUMN finished_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE arrays ADD COLUMN stop_req INTEGER NOT NULL DEFAULT 0;
ALTER TABLE arrays ADD COLUMN estimated_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE arrays ADD COLUMN meta TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN status TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN spec TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN submitted_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN started_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN finished_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN stop_req INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN estimated_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN meta TEXT NOT NULL DEFAULT '';
-- As runs': names (FindRun, uniqueness) and windowed listings (sacct).
CREATE INDEX arrays_name ON arrays (project_id, name, id);
CREATE INDEX schedules_name ON schedules (project_id, name, id);
CREATE INDEX arrays_finished_id ON arrays (finished_at, id);
CREATE INDEX schedules_finished_id ON schedules (finished_at, id);

-- An array's or a schedule's run row without a record (none is expected:
-- 00027 made them) gets one first.
INSERT INTO arrays (id, project_id, user_id, indices, next, done, failed, active)
SELECT r.id, r.project_id, r.user_id, json_extract(r.spec, '$.array'),
       (SELECT COUNT(*) FROM runs t WHERE t.array_id = r.id),
       (SELECT COUNT(*) FROM runs t WHERE t.array_id = r.id AND t.status = 'done'),
       (SELECT COUNT(*) FROM runs t WHERE t.array_id = r.id AND t.active = 0 AND t.status <> 'done'), r.active
FROM runs r WHERE r.array_id = 0 AND r.spec LIKE '{%' AND COALESCE(json_extract(r.spec, '$.array'), '') <> ''
  AND r.id NOT IN (SELECT id FROM arrays);
INSERT INTO schedules (id, project_id, user_id, name, cron, next_fire, active)
SELECT r.id, r.project_id, r.user_id, r.name, COALESCE(json_extract(r.spec, '$.schedule.cron'), '[]'),
       CASE WHEN r.active = 1 THEN r.estimated_start ELSE 0 END, r.active
FROM runs r WHERE r.array_id = 0 AND r.spec LIKE '{%' AND json_extract(r.spec, '$.schedule') IS NOT NULL
  AND r.id NOT IN (SELECT id FROM schedules);

UPDATE arrays SET name = r.name, status = r.status, reason = r.reason, priority = r.priority, spec = r.spec,
  submitted_at = r.submitted_at, started_at = r.started_at, finished_at = r.finished_at, stop_req = r.stop_req,
  estimated_start = r.estimated_start, meta = r.meta, active = r.active
FROM runs r WHERE r.id = arrays.id;
UPDATE schedules SET name = r.name, status = r.status, reason = r.reason, priority = r.priority, spec = r.spec,
  submitted_at = r.submitted_at, started_at = r.started_at, finished_at = r.finished_at, stop_req = r.stop_req,
  estimated_start = r.estimated_start, meta = r.meta, active = r.active
FROM runs r WHERE r.id = schedules.id;
DELETE FROM runs WHERE id IN (SELECT id FROM arrays UNION SELECT id FROM schedules);

-- +goose Down
INSERT INTO runs (id, project_id, user_id, name, status, reason, priority, spec, submitted_at, started_at,
  finished_at, stop_req, active, estimated_start, meta)
SELECT id, project_id, user_id, name, status, reason, priority, spec, submitted_at, started_at,
  finished_at, stop_req, active, estimated_start, meta FROM arrays
UNION ALL
SELECT id, project_id, user_id, name, status, reason, priority, spec, submitted_at, started_at,
  finished_at, stop_req, active, estimated_start, meta FROM schedules;
DROP INDEX schedules_finished_id;
DROP INDEX arrays_finished_id;
DROP INDEX schedules_name;
DROP INDEX arrays_name;
ALTER TABLE schedules DROP COLUMN meta;
ALTER TABLE schedules DROP COLUMN estimated_start;
ALTER TABLE schedules DROP COLUMN stop_req;
ALTER TABLE schedules DROP COLUMN finished_at;
ALTER TABLE schedules DROP COLUMN started_at;
ALTER TABLE schedules DROP COLUMN submitted_at;
ALTER TABLE schedules DROP COLUMN spec;
ALTER TABLE schedules DROP COLUMN priority;
ALTER TABLE schedules DROP COLUMN reason;
ALTER TABLE schedules DROP COLUMN status;
ALTER TABLE arrays DROP COLUMN meta;
ALTER TABLE arrays DROP COLUMN estimated_start;
ALTER TABLE arrays DROP COLUMN stop_req;
ALTER TABLE arrays DROP COLUMN finished_at;
ALTER TABLE arrays DROP COLUMN started_at;
ALTER TABLE arrays DROP COLUMN submitted_at;
ALTER TABLE arrays DROP COLUMN spec;
ALTER TABLE arrays DROP COLUMN priority;
ALTER TABLE arrays DROP COLUMN reason;
ALTER TABLE arrays DROP COLUMN status;
ALTER TABLE arrays DROP COLUMN name;
