-- +goose Up
-- What the lifecycle already acted on, per change request, so each
-- transition acts once. Not observations: no reviewer lists.
CREATE TABLE change_request_checkpoints (
    task_id               TEXT NOT NULL,
    repository_id         TEXT NOT NULL,
    -- the workspace username a review request was prompted for ('' none)
    review_requested_user TEXT NOT NULL DEFAULT '',
    merged                INTEGER NOT NULL DEFAULT 0 CHECK (merged IN (0, 1)),
    closed                INTEGER NOT NULL DEFAULT 0 CHECK (closed IN (0, 1)),
    -- the head commit whose failed checks were prompted ('' none)
    checks_failed_sha     TEXT NOT NULL DEFAULT '',
    auto_merged_sha       TEXT NOT NULL DEFAULT '',
    -- why the last evaluation could not act ('' none), so it is reported once
    skipped_reason        TEXT NOT NULL DEFAULT '',
    updated_at            TEXT NOT NULL,
    PRIMARY KEY (task_id, repository_id),
    FOREIGN KEY (task_id, repository_id) REFERENCES task_change_requests (task_id, repository_id) ON DELETE CASCADE
) STRICT;

-- Messages for a task's agent; kept until read, so a task with no live
-- session gets them in its next one.
CREATE TABLE task_prompts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    text       TEXT NOT NULL,
    link       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    read_at    TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX task_prompts_unread ON task_prompts (task_id, read_at);

-- +goose Down
DROP TABLE task_prompts;
DROP TABLE change_request_checkpoints;
