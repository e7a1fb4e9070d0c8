-- PostgreSQL translation of ../migrations/00012_revoked_certificates.sql (ADR 0023): no STRICT.
-- +goose Up
-- Client certificates the API refuses from their revocation on, by serial
-- number (lowercase hex), whatever they say and however long they are
-- still valid for. Name, issuer and expiry describe them for listings.
CREATE TABLE revoked_certificates (
    serial     TEXT PRIMARY KEY,
    name       TEXT NOT NULL DEFAULT '',
    issuer     TEXT NOT NULL DEFAULT '',
    not_after  TEXT NOT NULL DEFAULT '',
    revoked_by TEXT NOT NULL DEFAULT '',
    revoked_at TEXT NOT NULL
);

-- +goose Down
DROP TABLE revoked_certificates;
