-- PostgreSQL translation of ../migrations/00003_change_requests.sql (ADR 0023): BIGINT for
-- INTEGER, BYTEA for BLOB, identity columns for AUTOINCREMENT, no STRICT.
-- +goose Up
-- The pull request (GitHub) or merge request (GitLab) a task opened on one
-- of its repositories, and the task's automation settings for it. What a
-- poll observes (reviewers, checks) is not stored here.
CREATE TABLE task_change_requests (
    task_id                 TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    repository_id           TEXT NOT NULL REFERENCES repositories (id),
    provider                TEXT NOT NULL CHECK (provider IN ('github', 'gitlab')),
    number                  BIGINT NOT NULL CHECK (number > 0),
    url                     TEXT NOT NULL,
    title                   TEXT NOT NULL,
    source_branch           TEXT NOT NULL,
    target_branch           TEXT NOT NULL,
    auto_merge              BIGINT NOT NULL DEFAULT 0 CHECK (auto_merge IN (0, 1)),
    prompt_review_requested BIGINT NOT NULL DEFAULT 1 CHECK (prompt_review_requested IN (0, 1)),
    prompt_merged           BIGINT NOT NULL DEFAULT 1 CHECK (prompt_merged IN (0, 1)),
    prompt_closed           BIGINT NOT NULL DEFAULT 1 CHECK (prompt_closed IN (0, 1)),
    auto_fix_checks         BIGINT NOT NULL DEFAULT 0 CHECK (auto_fix_checks IN (0, 1)),
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);

-- +goose Down
DROP TABLE task_change_requests;
