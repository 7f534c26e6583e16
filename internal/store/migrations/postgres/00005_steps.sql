-- +goose Up
-- Job steps: srun inside an allocation (and srun --pty, salloc's shell
-- steps). One row per step of a run, numbered from 0 within the run as
-- Slurm numbers them (JOBID.STEPID). Ranks and exits are JSON: the node
-- ranks the step runs on and, per rank, its exit status once known. The
-- output is not kept here: it goes to srun as it comes. (pty is a BOOLEAN
-- here, SQLite's 0 or 1 there: Go's bool reads and writes both.)
CREATE TABLE steps (
  run_id       BIGINT  NOT NULL REFERENCES runs(id),
  step_id      INTEGER NOT NULL,
  name         TEXT    NOT NULL,
  argv         TEXT    NOT NULL,
  ranks        TEXT    NOT NULL,
  ntasks       INTEGER NOT NULL,
  nodelist     TEXT    NOT NULL DEFAULT '',
  pty          BOOLEAN NOT NULL DEFAULT FALSE,
  status       TEXT    NOT NULL,
  exit_code    INTEGER,
  exits        TEXT    NOT NULL DEFAULT '{}',
  started_at   BIGINT  NOT NULL,
  finished_at  BIGINT  NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, step_id)
);

-- +goose Down
DROP TABLE steps;
