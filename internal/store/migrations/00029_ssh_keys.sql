-- +goose Up
-- Users' SSH public keys (issue 16): the server's SSH gateway (berth
-- server --ssh-listen) lets a key's user into their runs' SSH endpoints
-- with no token. One row per key, found by its SHA-256 fingerprint (as
-- ssh-keygen -l prints it); a key belongs to one user.
CREATE TABLE ssh_keys (
    fingerprint TEXT PRIMARY KEY,
    user_id     BIGINT NOT NULL,
    public_key  TEXT NOT NULL,
    comment     TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX ssh_keys_user ON ssh_keys (user_id);

-- +goose Down
DROP TABLE ssh_keys;
