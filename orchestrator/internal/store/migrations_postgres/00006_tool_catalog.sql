-- PostgreSQL translation of ../migrations/00006_tool_catalog.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- External MCP servers whose tools the catalog governs. Secrets are
-- references only: environment variable names (stdio_env, http_headers)
-- and credential references (http_headers), never values.
CREATE TABLE tool_providers (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    transport         TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
    stdio_command     TEXT NOT NULL DEFAULT '',
    stdio_args        TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    stdio_working_dir TEXT NOT NULL DEFAULT '',
    stdio_env         TEXT NOT NULL DEFAULT '[]', -- JSON array of {name, from_env}
    http_url          TEXT NOT NULL DEFAULT '',
    http_headers      TEXT NOT NULL DEFAULT '[]', -- JSON array of {name, kind, ref, prefix}
    enabled           BIGINT NOT NULL DEFAULT 0 CHECK (enabled IN (0, 1)),
    discovered_at     TEXT NOT NULL DEFAULT '',
    discovery_error   TEXT NOT NULL DEFAULT '',
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

-- One record per tool a provider ever listed; never deleted. exposed_name
-- is assigned once and kept, so agents see a stable name.
CREATE TABLE catalog_tools (
    id            TEXT PRIMARY KEY,
    provider_id   TEXT NOT NULL REFERENCES tool_providers (id),
    external_name TEXT NOT NULL,
    exposed_name  TEXT NOT NULL UNIQUE,
    title         TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    input_schema  TEXT NOT NULL,
    output_schema TEXT NOT NULL DEFAULT '',
    schema_hash   TEXT NOT NULL,
    read_only     BIGINT NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    enabled       BIGINT NOT NULL DEFAULT 0 CHECK (enabled IN (0, 1)),
    available     BIGINT NOT NULL DEFAULT 1 CHECK (available IN (0, 1)),
    first_seen    TEXT NOT NULL,
    last_seen     TEXT NOT NULL,
    UNIQUE (provider_id, external_name)
);

-- Which workspaces' sessions may see a tool.
CREATE TABLE tool_assignments (
    tool_id      TEXT NOT NULL REFERENCES catalog_tools (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (tool_id, workspace_id)
);
CREATE INDEX tool_assignments_workspace ON tool_assignments (workspace_id);

-- The catalog generation: bumped in the transaction of every change that
-- can change what a session sees. One row.
CREATE TABLE catalog_generation (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL CHECK (generation > 0)
);
INSERT INTO catalog_generation (id, generation) VALUES (1, 1);

-- The catalog generation of the external tool set a session's agentctl
-- last applied (0: none).
ALTER TABLE sessions ADD COLUMN external_generation BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN external_generation;
DROP TABLE catalog_generation;
DROP TABLE tool_assignments;
DROP TABLE catalog_tools;
DROP TABLE tool_providers;
