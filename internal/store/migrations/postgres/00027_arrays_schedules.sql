-- +goose Up
-- Arrays and schedules get records of their own (issue 12). Their state
-- was JSON in their run row's meta; the run row stays as what lists them
-- (name, status, spec, times: berth ps, squeue, sacct) and is the spec
-- these records refer to by ID (an array's ID is Slurm's array job ID).
--
-- arrays: one per submission with `array:`. indices is the index set as
-- submitted; next counts the tasks made (the set's first `next` indices);
-- cancel is a JSON list of indices stopped before they were made; done and
-- failed count the tasks that ended so; active is 0 once the array ended.
CREATE TABLE arrays (
    id         BIGINT PRIMARY KEY,
    project_id BIGINT NOT NULL,
    user_id    BIGINT NOT NULL,
    indices    TEXT NOT NULL,
    throttle   INTEGER NOT NULL DEFAULT 0,
    next       INTEGER NOT NULL DEFAULT 0,
    cancel     TEXT NOT NULL DEFAULT '',
    stopped    INTEGER NOT NULL DEFAULT 0,
    done       INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0,
    active     INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX arrays_active ON arrays (active);

-- schedules: one per configuration with `schedule:`. cron is the JSON list
-- of its cron lines; next_fire its next tick (Unix ns; 0 once stopped);
-- last_run the run its last tick submitted (0: none yet); runs how many.
CREATE TABLE schedules (
    id         BIGINT PRIMARY KEY,
    project_id BIGINT NOT NULL,
    user_id    BIGINT NOT NULL,
    name       TEXT NOT NULL,
    cron       TEXT NOT NULL,
    next_fire  BIGINT NOT NULL DEFAULT 0,
    last_run   BIGINT NOT NULL DEFAULT 0,
    runs       INTEGER NOT NULL DEFAULT 0,
    active     INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX schedules_active ON schedules (active);

-- Existing arrays and schedules move out of their run rows' meta.
INSERT INTO arrays (id, project_id, user_id, indices, throttle, next, cancel, stopped, done, failed, active)
SELECT r.id, r.project_id, r.user_id, COALESCE(r.spec::jsonb ->> 'array', ''),
       COALESCE((r.meta::jsonb #>> '{array,throttle}')::INTEGER, 0), COALESCE((r.meta::jsonb #>> '{array,next}')::INTEGER, 0),
       COALESCE(r.meta::jsonb #>> '{array,cancel}', ''),
       CASE WHEN (r.meta::jsonb #>> '{array,stopped}') = 'true' THEN 1 ELSE 0 END,
       (SELECT COUNT(*) FROM runs t WHERE t.array_id = r.id AND t.status = 'done'),
       COALESCE((r.meta::jsonb #>> '{array,failed}')::INTEGER, 0), r.active
FROM runs r WHERE r.array_id = 0 AND r.meta <> '' AND r.meta::jsonb ? 'array';

INSERT INTO schedules (id, project_id, user_id, name, cron, next_fire, last_run, runs, active)
SELECT r.id, r.project_id, r.user_id, r.name, COALESCE(r.spec::jsonb #>> '{schedule,cron}', '[]'),
       CASE WHEN r.active = 1 THEN r.estimated_start ELSE 0 END,
       COALESCE((SELECT MAX(CAST(substr(e.message, 15) AS BIGINT)) FROM events e
                 WHERE e.run_id = r.id AND e.type = 'scheduled' AND e.message LIKE 'submitted run %'), 0),
       COALESCE((r.meta::jsonb #>> '{schedule,runs}')::INTEGER, 0), r.active
FROM runs r WHERE r.array_id = 0 AND r.meta <> '' AND r.meta::jsonb ? 'schedule';

UPDATE runs SET meta = (meta::jsonb - 'array' - 'schedule')::TEXT
WHERE id IN (SELECT id FROM arrays UNION SELECT id FROM schedules);
UPDATE runs SET meta = '' WHERE meta = '{}';

-- +goose Down
UPDATE runs SET meta = jsonb_set(CASE WHEN runs.meta = '' THEN '{}'::jsonb ELSE runs.meta::jsonb END, '{array}',
    jsonb_build_object('next', a.next, 'throttle', a.throttle, 'failed', a.failed, 'stopped', a.stopped = 1,
                       'cancel', CASE WHEN a.cancel = '' THEN '[]'::jsonb ELSE a.cancel::jsonb END))::TEXT
FROM arrays a WHERE runs.id = a.id;
UPDATE runs SET meta = jsonb_set(CASE WHEN runs.meta = '' THEN '{}'::jsonb ELSE runs.meta::jsonb END, '{schedule}',
    jsonb_build_object('next', to_char(to_timestamp(s.next_fire / 1000000000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'runs', s.runs))::TEXT
FROM schedules s WHERE runs.id = s.id;
DROP TABLE schedules;
DROP TABLE arrays;
