-- PostgreSQL translation of ../migrations/00009_agent_exit.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- The exit code of a session's agent process, once the orchestrator
-- recorded its exit (a agent.exited event); NULL while the agent of
-- the session's current run is running, or for a session without an agent.
-- It makes the record happen once, whether agentctl's event or an
-- inspection tells of the exit first.
ALTER TABLE sessions ADD COLUMN agent_exit_code BIGINT;

-- +goose Down
ALTER TABLE sessions DROP COLUMN agent_exit_code;
