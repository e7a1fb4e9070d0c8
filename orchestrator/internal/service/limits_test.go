package service_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
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
