-- PostgreSQL translation of ../migrations/00007_api_tokens.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- API tokens for callers over TCP. Only the SHA-256 of the secret is kept;
-- the secret is shown once, at creation. A token is found by its id (part
-- of the token as sent) and its hash compared in constant time.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('viewer', 'member', 'admin')),
    secret_hash BYTEA NOT NULL,
    created_by  TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE api_tokens;
