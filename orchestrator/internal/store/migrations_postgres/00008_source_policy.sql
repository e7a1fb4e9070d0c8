-- PostgreSQL translation of ../migrations/00008_source_policy.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- A workspace's policy for repositories its agents attach themselves
-- (task_add_sources): allow (attached at once), deny (refused) or approve
-- (held as a source request for a person to decide).
ALTER TABLE workspaces ADD COLUMN agent_sources TEXT NOT NULL DEFAULT 'allow'
    CHECK (agent_sources IN ('allow', 'deny', 'approve'));

-- Who made the change an event records: "person:<name>" or
-- "session:<id>"; "" for events without an actor (pushes, recomputes).
ALTER TABLE task_events ADD COLUMN actor TEXT NOT NULL DEFAULT '';

-- An agent's batch held for a person's decision under the approve policy.
-- requested_by and decided_by are actors as in task_events.actor.
CREATE TABLE source_requests (
    id             TEXT PRIMARY KEY,
    task_id        TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL DEFAULT '',
    repository_ids TEXT NOT NULL, -- JSON array, in the agent's order
    state          TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'rejected')),
    requested_by   TEXT NOT NULL,
    decided_by     TEXT NOT NULL DEFAULT '',
    reason         TEXT NOT NULL DEFAULT '',
    attached_ids   TEXT NOT NULL DEFAULT '[]', -- JSON array: what the approval attached
    created_at     TEXT NOT NULL,
    decided_at     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX source_requests_task ON source_requests (task_id, state);

-- +goose Down
DROP TABLE source_requests;
ALTER TABLE task_events DROP COLUMN actor;
ALTER TABLE workspaces DROP COLUMN agent_sources;
