-- +goose Up
-- Identity (issue 15). A deleted user keeps its row (its runs name it:
-- squeue's USER) but loses its tokens and may not sign in again until an
-- administrator creates it anew.
ALTER TABLE users ADD COLUMN deleted_at BIGINT NOT NULL DEFAULT 0;

-- A token has a public ID (berth token list | revoke ID; the secret itself
-- is shown once and kept only as its SHA-256) and may expire (0: never).
-- The tokens made before have the start of their hash as their ID.
ALTER TABLE tokens ADD COLUMN id TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
UPDATE tokens SET id = substr(hash, 1, 16) WHERE id = '';
CREATE UNIQUE INDEX tokens_id ON tokens (id);

-- A node's credential, apart from users' tokens: it acts only as that
-- node (its agent's endpoints), and asserts the Unix users of its host
-- only when assert_users is set.
CREATE TABLE node_tokens (
    hash         TEXT PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    node         TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    assert_users INTEGER NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL DEFAULT 0
);

-- The server's own keys (by name), shared by its replicas: the key that
-- signs each run's job credential.
CREATE TABLE server_keys (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE server_keys;
DROP TABLE node_tokens;
DROP INDEX tokens_id;
ALTER TABLE tokens DROP COLUMN expires_at;
ALTER TABLE tokens DROP COLUMN id;
ALTER TABLE users DROP COLUMN deleted_at;
