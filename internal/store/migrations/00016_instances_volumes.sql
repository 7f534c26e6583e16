-- +goose Up
-- Backend fleets' instances (issue 17). A row is written with state
-- 'creating' BEFORE the provider is asked to create the instance, under
-- the idempotency key given to the provider; after a restart the server
-- reconciles these rows against the provider's list (adopt, mark gone,
-- terminate leaks), so a crash never doubles or leaks an instance.
-- offer is the provider.Offer as JSON; node is the Berth node the
-- instance's agent joins as.
CREATE TABLE instances (
    key        TEXT PRIMARY KEY,
    fleet      TEXT NOT NULL,
    backend    TEXT NOT NULL,
    offer      TEXT NOT NULL,
    node       TEXT NOT NULL,
    state      TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Volumes (type: volume), per project. backend 'local' is an instance
-- volume (a host path on node); any other backend is a network volume
-- made through that provider under provider_name.
CREATE TABLE volumes (
    project_id    BIGINT NOT NULL,
    name          TEXT NOT NULL,
    backend       TEXT NOT NULL,
    provider_name TEXT NOT NULL DEFAULT '',
    node          TEXT NOT NULL DEFAULT '',
    path          TEXT NOT NULL DEFAULT '',
    size          BIGINT NOT NULL DEFAULT 0,
    state         TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

-- +goose Down
DROP TABLE volumes;
DROP TABLE instances;
