-- PostgreSQL translation of ../migrations/00010_pg_replica_leases.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- Replicas (issue 21, ADR 0027). Each live session is owned by one
-- orchestrator replica (sessions.owner, its replica id; '' before any
-- replica claimed it). A lease is held by a holder until expires_ms,
-- milliseconds since the epoch by the DATABASE's clock: the replica
-- leases ('replica:<id>', renewed by the replica itself, so a session's
-- owner is alive while its lease is) and the lifecycle poller's leases
-- ('poller:<workspace>:<provider>', one poller per workspace connection).
ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- +goose Down
DROP TABLE leases;
ALTER TABLE sessions DROP COLUMN owner;
