-- +goose Up
-- The container image of a docker session ('' for other executors).
ALTER TABLE sessions ADD COLUMN image TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN image;
