-- PostgreSQL translation of ../migrations/00013_session_checkouts.sql (ADR 0023): the same.
-- +goose Up
-- A session's workspace as its last launch made it and what was delivered
-- from it since (model.Checkouts, as JSON): shown by session get and read
-- by task_info.
ALTER TABLE sessions ADD COLUMN checkouts TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE sessions DROP COLUMN checkouts;
