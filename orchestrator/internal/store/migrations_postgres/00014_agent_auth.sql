-- PostgreSQL translation of ../migrations/00014_agent_auth.sql (ADR 0023): the same.
-- +goose Up
-- How a session's agent pays for its model ("api-key" or "subscription";
-- empty: the default), so resume starts it with the same environment.
ALTER TABLE sessions ADD COLUMN agent_auth TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN agent_auth;
