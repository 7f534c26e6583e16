-- +goose Up
-- Services (issue 16): one row per active `type: service` configuration
-- of a project, by name. Its replicas are ordinary runs of that project
-- and name; the server keeps their count at wanted (the autoscaler moves
-- it within the spec's replicas range), replacing a replica whose spec
-- differs from this one (a rolling update). The row goes when the service
-- is stopped.
CREATE TABLE services (
    project_id BIGINT NOT NULL,
    name       TEXT NOT NULL,
    user_id    BIGINT NOT NULL,
    spec       BLOB NOT NULL,
    wanted     INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

-- +goose Down
DROP TABLE services;
