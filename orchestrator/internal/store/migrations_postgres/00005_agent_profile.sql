-- PostgreSQL translation of ../migrations/00005_agent_profile.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- The agent profile a session runs, so resume relaunches the same agent.
ALTER TABLE sessions ADD COLUMN agent_profile TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN agent_model TEXT NOT NULL DEFAULT '';
-- A reference: the name of the variable holding the model API key.
ALTER TABLE sessions ADD COLUMN agent_credential_env TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN agent_credential_env;
ALTER TABLE sessions DROP COLUMN agent_model;
ALTER TABLE sessions DROP COLUMN agent_profile;
