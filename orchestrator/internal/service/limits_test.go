package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// TestBatchLimitIsAClearError: a batch of MaxBatch repositories is
// attached; one more is refused before anything is read or written, with
// an error that names the field and the limit.
func TestBatchLimitIsAClearError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	var ids []string
	for i := range service.MaxBatch + 1 {
		r, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab", Host: "gitlab.com",
			Path: fmt.Sprintf("acme/r%d", i)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}

	_, err := w.svc.AddSources(ctx, w.task.ID, ids)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.Equal(t, "repository_ids", errdefs.FieldOf(err))
	assert.Contains(t, err.Error(), fmt.Sprintf("%d repositories in one batch; the limit is %d", service.MaxBatch+1, service.MaxBatch))
	task, err := w.svc.GetTask(ctx, w.task.ID)
	require.NoError(t, err)
	assert.Len(t, task.Repositories, 1, "the refused batch attached nothing")

	res, err := w.svc.AddSources(ctx, w.task.ID, ids[:service.MaxBatch])
	require.NoError(t, err)
	assert.Len(t, res.Task.Repositories, 1+service.MaxBatch)
	testutil.Figure(t, "limit: batch size", "a batch of %d attached in one generation; %d refused as invalid repository_ids, nothing attached", service.MaxBatch, service.MaxBatch+1)
}

// TestFreeTextIsBounded: each free-text field a person types is refused
// over its limit or with a control character, with an error naming the
// field and the limit, and nothing is stored. Three descriptions of 1.3
// MB each (together over gRPC's 4 MiB reply) once made the workspace's
// task list unreadable for good.
func TestFreeTextIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	huge := strings.Repeat("d", 1<<20+300_000)
	for range 3 {
		_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "big", Description: huge, RepositoryID: w.github.ID})
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		assert.Equal(t, "description", errdefs.FieldOf(err))
		assert.ErrorContains(t, err, fmt.Sprintf("is %d characters long; the limit is %d", len(huge), textlimit.Text.Max))
	}
	for _, c := range []struct {
		field string
		call  func() error
	}{
		{"title", func() error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "fix \x1b[2Jlogin", RepositoryID: w.github.ID})
			return err
		}},
		{"title", func() error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: strings.Repeat("t", textlimit.Title.Max+1), RepositoryID: w.github.ID})
			return err
		}},
		{"description", func() error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "t", Description: "a\x00b", RepositoryID: w.github.ID})
			return err
		}},
		{"name", func() error { _, err := w.svc.CreateWorkspace(ctx, "tab\tname"); return err }},
		{"path", func() error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local",
				Path: "/" + strings.Repeat("p", textlimit.Path.Max)})
			return err
		}},
	} {
		err := c.call()
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, c.field)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%v", err)
	}
	tasks, err := w.svc.ListTasks(ctx, w.ws.ID)
	require.NoError(t, err)
	assert.Len(t, tasks, 1, "no refused task was stored")

	atLimit := strings.Repeat("d", textlimit.Text.Max-1) + "\n"
	_, err = w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "at the limit", Description: atLimit, RepositoryID: w.github.ID})
	require.NoError(t, err)
	testutil.Figure(t, "limit: free text", "3 descriptions of %d characters refused as invalid description (limit %d); one of %d stored",
		len(huge), textlimit.Text.Max, textlimit.Text.Max)
}

// TestAgentArgumentsAreBounded: a launch's agent arguments are free text
// stored with the session and listed with it: each is bounded and holds no
// control character but line feeds, carriage returns and tabs, and all of
// them together are bounded too. Checked before anything is recorded (a
// dry run checks the same).
func TestAgentArgumentsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	half := strings.Repeat("p", textlimit.Text.Max/2+1)
	for _, c := range []struct {
		argv  []string
		field string
		want  string
	}{
		{[]string{"sh", "-c", "echo \x1b[2J"}, "agent.argv[2]", "control character (U+001B)"},
		{[]string{"sh", "-c", "a\x00b"}, "agent.argv[2]", "control character (U+0000)"},
		{[]string{"claude", "-p", half, half}, "agent.argv", fmt.Sprintf("the limit is %d", textlimit.Text.Max)},
	} {
		_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: c.argv})
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, c.field)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%v", err)
		assert.ErrorContains(t, err, c.want)
	}
	_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: []string{"claude", "-p", "line one\n\tline two"}})
	require.NoError(t, err)
}
