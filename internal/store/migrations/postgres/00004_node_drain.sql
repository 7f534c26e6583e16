-- +goose Up
-- A node's drain state, kept by the server as JSON (empty: none): an
-- administrator's drain (reason, by whom, since when) and the node's last
-- health report that warns or fails (a failed node is drained until a check
-- passes). Both survive a restart of the server.
ALTER TABLE nodes ADD COLUMN drain TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE nodes DROP COLUMN drain;
