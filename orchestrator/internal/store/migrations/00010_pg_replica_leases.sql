-- +goose Up
-- Replicas (issue 21, ADR 0027). Each live session is owned by one
-- orchestrator replica (sessions.owner, its replica id; '' before any
-- replica claimed it). A lease is held by a holder until expires_ms,
-- milliseconds since the epoch by the DATABASE's clock: the replica
-- leases ('replica:<id>', renewed by the replica itself, so a session's
-- owner is alive while its lease is) and the lifecycle poller's leases
-- ('poller:<workspace>:<provider>', one poller per workspace connection).
-- SQLite has one process (its data-directory lock): its leases are held
-- by that one replica and never contended.
ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE leases;
ALTER TABLE sessions DROP COLUMN owner;
