-- +goose Up
-- Blobs (issue 16): the archives berth apply packs from a configuration's
-- repos and files, content-addressed. digest is the hex SHA-256 of data
-- (a gzip'd tar); the same tree uploaded twice is one row, and a client
-- asks for the digest before sending. Kept in the database, beside the
-- runs that name them, so a backup or a PostgreSQL replica has both
-- (docs/design.md, "Where uploaded code lives").
CREATE TABLE blobs (
    digest     TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE blobs;
