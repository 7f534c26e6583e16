-- +goose Up
-- Secrets (issue 15), per project. value is the AEAD ciphertext (a
-- 12-byte nonce, then AES-256-GCM's sealed value, bound to the project and
-- the name): the key is never in this database (BERTH_SECRETS_KEY, or the
-- key file beside it). set_by is the user who last set the value: they
-- (or an admin) may read it back.
CREATE TABLE secrets (
    project_id BIGINT NOT NULL,
    name       TEXT NOT NULL,
    value      BLOB NOT NULL,
    set_by     BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

-- +goose Down
DROP TABLE secrets;
