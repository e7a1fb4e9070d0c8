-- +goose Up
CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
) STRICT;

-- One connection per provider and workspace. The credential is a reference
-- (an environment variable name or a file path), never the secret.
CREATE TABLE connections (
    workspace_id    TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    provider        TEXT NOT NULL CHECK (provider IN ('github', 'gitlab')),
    api_base_url    TEXT NOT NULL,
    credential_kind TEXT NOT NULL CHECK (credential_kind IN ('env', 'file')),
    credential_ref  TEXT NOT NULL,
    username        TEXT NOT NULL DEFAULT '',
    validated_at    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workspace_id, provider)
) STRICT;

-- provider is stored exactly as given; only the allowlist decides what it
-- contributes to a task's provider set.
CREATE TABLE repositories (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    provider     TEXT NOT NULL,
    host         TEXT NOT NULL COLLATE NOCASE,
    path         TEXT NOT NULL COLLATE NOCASE,
    remote_url   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    UNIQUE (workspace_id, host, path)
) STRICT;

CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces (id),
    title               TEXT NOT NULL,
    description         TEXT NOT NULL,
    provider_generation INTEGER NOT NULL CHECK (provider_generation > 0),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
) STRICT;
CREATE INDEX tasks_workspace ON tasks (workspace_id);

CREATE TABLE task_repositories (
    task_id       TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    repository_id TEXT NOT NULL REFERENCES repositories (id),
    position      INTEGER NOT NULL CHECK (position >= 0),
    is_primary    INTEGER NOT NULL CHECK (is_primary IN (0, 1)),
    PRIMARY KEY (task_id, repository_id),
    UNIQUE (task_id, position)
) STRICT;
CREATE UNIQUE INDEX task_repositories_one_primary ON task_repositories (task_id) WHERE is_primary = 1;

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    task_id           TEXT NOT NULL REFERENCES tasks (id),
    executor          TEXT NOT NULL,
    mode              TEXT NOT NULL CHECK (mode IN ('task', 'plan')),
    state             TEXT NOT NULL CHECK (state IN ('pending', 'running', 'stopped', 'failed')),
    agent_argv        TEXT NOT NULL,
    agent_work_dir    TEXT NOT NULL,
    handle_version    INTEGER NOT NULL DEFAULT 0,
    handle_state      BLOB,
    pushed_providers  TEXT NOT NULL DEFAULT '',
    pushed_generation INTEGER NOT NULL DEFAULT 0,
    needs_repair      INTEGER NOT NULL DEFAULT 0 CHECK (needs_repair IN (0, 1)),
    status_message    TEXT NOT NULL DEFAULT '',
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_task ON sessions (task_id);

CREATE TABLE task_events (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id        TEXT NOT NULL REFERENCES tasks (id),
    kind           TEXT NOT NULL,
    session_id     TEXT NOT NULL DEFAULT '',
    repository_ids TEXT NOT NULL DEFAULT '[]',
    providers      TEXT NOT NULL DEFAULT '',
    generation     INTEGER NOT NULL DEFAULT 0,
    message        TEXT NOT NULL DEFAULT '',
    created_at     TEXT NOT NULL
) STRICT;
CREATE INDEX task_events_task ON task_events (task_id, seq);

-- +goose Down
DROP TABLE task_events;
DROP TABLE sessions;
DROP TABLE task_repositories;
DROP TABLE tasks;
DROP TABLE repositories;
DROP TABLE connections;
DROP TABLE workspaces;
