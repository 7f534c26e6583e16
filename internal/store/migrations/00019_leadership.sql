-- +goose Up
-- The replicas' fencing token (issue 19). Replicas run on PostgreSQL only;
-- the table is here too so that both dialects hold the same tables (and
-- berth admin migrate-store copies it either way).
CREATE TABLE leadership (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    epoch      INTEGER NOT NULL,
    leader_url TEXT    NOT NULL DEFAULT '',
    since      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO leadership (id, epoch) VALUES (1, 0);

-- +goose Down
DROP TABLE leadership;
