-- +goose Up
-- Fleets (issue 17): a project's fleet configuration as applied (spec, the
-- JSON of spec.Fleet), its status (provisioning, active, deleting, failed),
-- the SSH private key the client sent (sealed like a secret: a 12-byte
-- nonce, then AES-256-GCM's sealed value, bound to the fleet's name; never
-- plain text), and each host's state (hosts: JSON, one entry per host
-- with the step it reached, recorded before each step so that a restarted
-- server resumes where it stopped).
CREATE TABLE fleets (
    name       TEXT NOT NULL PRIMARY KEY,
    project_id BIGINT NOT NULL,
    spec       TEXT NOT NULL,
    status     TEXT NOT NULL,
    ssh_key    BLOB,
    server_url TEXT NOT NULL,
    hosts      TEXT NOT NULL,
    created_by BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE fleets;
