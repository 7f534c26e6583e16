-- +goose Up
-- Job steps: srun inside an allocation (and srun --pty, salloc's shell
-- steps). One row per step of a run, numbered from 0 within the run as
-- Slurm numbers them (JOBID.STEPID). Ranks and exits are JSON: the node
-- ranks the step runs on and, per rank, its exit status once known. The
-- output is not kept here: it goes to srun as it comes.
CREATE TABLE steps (
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  step_id      INTEGER NOT NULL,
  name         TEXT    NOT NULL,
  argv         TEXT    NOT NULL,
  ranks        TEXT    NOT NULL,
  ntasks       INTEGER NOT NULL,
  nodelist     TEXT    NOT NULL DEFAULT '',
  pty          INTEGER NOT NULL DEFAULT 0,
  status       TEXT    NOT NULL,
  exit_code    INTEGER,
  exits        TEXT    NOT NULL DEFAULT '{}',
  started_at   INTEGER NOT NULL,
  finished_at  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, step_id)
);

-- +goose Down
DROP TABLE steps;
