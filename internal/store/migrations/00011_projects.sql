-- +goose Up
-- Projects and roles (issue 15), dstack's model: a user is a member of
-- projects, each with a role (admin: members, fleets, settings; manager:
-- members; user: runs and secrets); users.admin is the global
-- administrator. A project is a Slurm account. A deleted project keeps its
-- row (its runs name it) and loses its members.
ALTER TABLE projects ADD COLUMN deleted_at BIGINT NOT NULL DEFAULT 0;
CREATE TABLE project_members (
    project_id INTEGER NOT NULL,
    user_id    INTEGER NOT NULL,
    role       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_members_user ON project_members (user_id);

-- Every user there is is a member of the default project, "main", where
-- every run went until now.
INSERT INTO project_members (project_id, user_id, role, created_at)
    SELECT p.id, u.id, 'user', u.created_at FROM projects p, users u
    WHERE p.name = 'main' AND u.deleted_at = 0;

-- +goose Down
DROP INDEX project_members_user;
DROP TABLE project_members;
ALTER TABLE projects DROP COLUMN deleted_at;
