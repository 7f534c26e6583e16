-- +goose Up
-- The replicas' fencing token (issue 19): one row, whose epoch the replica
-- that takes the leader lease (an advisory lock) increments in the
-- transaction that takes over; every batch the leader commits checks,
-- in its own transaction, that the epoch is still its own, so a deposed
-- leader's late commit is refused. leader_url is where the leader says
-- clients reach it (--advertise-url), for followers to forward to.
CREATE TABLE leadership (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    epoch      BIGINT  NOT NULL,
    leader_url TEXT    NOT NULL DEFAULT '',
    since      BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO leadership (id, epoch) VALUES (1, 0);

-- +goose Down
DROP TABLE leadership;
