-- +goose Up
-- Jobs' metrics samples (issue 18), so that `berth metrics` and the
-- dashboard show them after a restart and for finished runs. Level 0 holds
-- the agents' samples as they came (every few seconds); past an hour the
-- server folds them into level 1, a sample a minute, kept for the
-- retention (--metrics-retention). data is the sample's JSON.
CREATE TABLE metric_samples (
    job_id BIGINT  NOT NULL,
    level  INTEGER NOT NULL,
    time   BIGINT  NOT NULL,
    data   TEXT    NOT NULL,
    PRIMARY KEY (job_id, level, time)
);
CREATE INDEX metric_samples_age ON metric_samples (level, time);

-- +goose Down
DROP INDEX metric_samples_age;
DROP TABLE metric_samples;
