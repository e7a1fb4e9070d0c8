-- PostgreSQL translation of ../migrations/00002_session_image.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- The container image of a docker session ('' for other executors).
ALTER TABLE sessions ADD COLUMN image TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN image;
