-- +goose Up
-- PostgreSQL's dialect of ../00001_initial.sql: the same tables, columns
-- and indexes. Times are Unix nanoseconds in BIGINT (0 = unset) as in
-- SQLite, so both read through the same code; JSON is TEXT; every integer
-- SQLite holds in 64 bits that can exceed 32 is BIGINT here; log data is
-- BYTEA. Generated IDs (projects, users, events) are BIGSERIAL.
CREATE TABLE projects (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE users (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    admin      INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    user_id    BIGINT NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE runs (
    id           BIGINT PRIMARY KEY,
    project_id   BIGINT NOT NULL REFERENCES projects(id),
    user_id      BIGINT NOT NULL REFERENCES users(id),
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
    id      BIGSERIAL PRIMARY KEY,
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
    data   BYTEA NOT NULL,
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
