package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestEventsAndPromptsAreStoredScrubbed: an event message and a prompt
// that carry a known credential (learnt after the store opened) and a
// token-shaped string are stored, published and read back scrubbed, and
// the database files never hold them.
func TestEventsAndPromptsAreStoredScrubbed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		known  = "Zq8vN2xLr5TbW9yKc3HdPf7G" // a credential without a prefix
		shaped = "glpat-Qw3Er5Ty7Ui9Op1As2Df"
	)
	dir := t.TempDir()
	var secrets scrub.Set
	rec := &recorder{}
	s, err := store.Open(ctx, dir, store.Options{OnCommit: rec.onCommit, Secrets: &secrets})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	f := newFixture(t, s, "acme")
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "fix"}, f.github.ID)
	require.NoError(t, err)
	secrets.Add(known)

	text := "GitHub refused the request (403): Forbidden (request had PRIVATE-TOKEN: " + known + ") token " + shaped
	require.NoError(t, s.AppendEvents(ctx, model.Event{TaskID: task.ID, Kind: model.EventKind("providers.push_failed"), Message: text}))
	_, err = s.RecordChangeRequest(ctx, model.ChangeRequest{TaskID: task.ID, RepositoryID: f.github.ID, Provider: "github",
		Number: 1, URL: "https://github.example/acme/api/pull/1", Automation: model.DefaultAutomation})
	require.NoError(t, err)
	prompts, err := s.Act(ctx, task.ID, f.github.ID, model.Checkpoint{}, []model.Prompt{{Text: "checks failed: " + text}}, nil)
	require.NoError(t, err)

	stored, err := s.Events(ctx, task.ID, 0, 100)
	require.NoError(t, err)
	taken, err := s.TakePrompts(ctx, task.ID)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	var texts []string
	for _, e := range append(stored, rec.snapshot()...) {
		texts = append(texts, e.Message)
	}
	texts = append(texts, prompts[0].Text, taken[0].Text)
	assert.Contains(t, texts, "GitHub refused the request (403): Forbidden (request had PRIVATE-TOKEN: [redacted]) token glpat-[redacted]")
	scanner := testutil.NewLeakScanner(map[string]string{"known": known, "shaped": shaped})
	for _, text := range texts {
		assert.Empty(t, scanner.Find([]byte(text)), text)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Empty(t, scanner.Find(b), file)
		if strings.HasSuffix(file, ".db-wal") || strings.HasSuffix(file, ".db") {
			assert.NotEmpty(t, b, file)
		}
	}
}
