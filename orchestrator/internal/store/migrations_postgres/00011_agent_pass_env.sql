-- PostgreSQL translation of ../migrations/00011_agent_pass_env.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- The NAMES of the executor's variables a session's agent also gets
-- (`session launch --env NAME`), as a JSON array, so that resume
-- relaunches the agent with them. Never their values.
ALTER TABLE sessions ADD COLUMN agent_pass_env TEXT NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE sessions DROP COLUMN agent_pass_env;
