-- +goose Up
-- Every run belongs to a project and a user from the start, so that
-- multi-tenancy adds rows, not columns. Times are Unix nanoseconds (0 = unset),
-- which SQLite and PostgreSQL store alike.
CREATE TABLE projects (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE users (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    admin      INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE runs (
    id           BIGINT PRIMARY KEY,
    project_id   INTEGER NOT NULL REFERENCES projects(id),
    user_id      INTEGER NOT NULL REFERENCES users(id),
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    exit_code    INTEGER,
    priority     INTEGER NOT NULL DEFAULT 0,
    spec         TEXT NOT NULL,
    submitted_at BIGINT NOT NULL,
    started_at   BIGINT NOT NULL DEFAULT 0,
    finished_at  BIGINT NOT NULL DEFAULT 0,
    stop_req     INTEGER NOT NULL DEFAULT 0,
    active       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX runs_active ON runs (active, id);
CREATE INDEX runs_name ON runs (project_id, name, id);
CREATE TABLE jobs (
    id           BIGINT PRIMARY KEY,
    run_id       BIGINT NOT NULL,
    num          INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    status       TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    exit_code    INTEGER,
    node         TEXT NOT NULL DEFAULT '',
    alloc        TEXT NOT NULL DEFAULT '{}',
    submitted_at BIGINT NOT NULL,
    started_at   BIGINT NOT NULL DEFAULT 0,
    finished_at  BIGINT NOT NULL DEFAULT 0,
    log_size     BIGINT NOT NULL DEFAULT 0,
    active       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX jobs_run ON jobs (run_id, num, attempt);
CREATE INDEX jobs_active ON jobs (active, id);
CREATE TABLE nodes (
    name          TEXT PRIMARY KEY,
    info          TEXT NOT NULL,
    registered_at BIGINT NOT NULL,
    last_seen     BIGINT NOT NULL
);
CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  BIGINT NOT NULL,
    job_id  BIGINT NOT NULL DEFAULT 0,
    time    BIGINT NOT NULL,
    type    TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_run ON events (run_id, id);
CREATE TABLE log_chunks (
    job_id BIGINT NOT NULL,
    off    BIGINT NOT NULL,
    stream TEXT NOT NULL,
    time   BIGINT NOT NULL,
    data   BLOB NOT NULL,
    PRIMARY KEY (job_id, off)
);

-- +goose Down
DROP TABLE log_chunks;
DROP TABLE events;
DROP TABLE nodes;
DROP TABLE jobs;
DROP TABLE runs;
DROP TABLE tokens;
DROP TABLE users;
DROP TABLE projects;
