package service_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// TestLaunchesAndPushesCarryTheOrientation: a launch carries the
// session's orientation as of the launch, and each push carries it as of
// the push (it has no generation of its own), so agentctl's server
// instructions say what task_info would (issue 19). A service with no
// orienter carries none.
func TestLaunchesAndPushesCarryTheOrientation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFaked(t, service.Options{})
	var calls atomic.Int32
	f.svc.SetOrienter(func(_ context.Context, sessionID string) ([]toolapi.Orientation, error) {
		n := calls.Add(1)
		return []toolapi.Orientation{{State: toolapi.OrientNotConnected, Provider: "gitlab", Message: fmt.Sprintf("%s read %d", sessionID, n)}}, nil
	})
	task := f.task(t, "github")
	sess := f.launch(t, task.ID)
	got := f.exec.Applied(sess.ID).Orientation
	require.NotNil(t, got, "the launch carried an orientation")
	assert.Equal(t, []toolapi.Orientation{{State: toolapi.OrientNotConnected, Provider: "gitlab", Message: sess.ID + " read 1"}}, got.Entries)

	_, err := f.svc.AddSources(ctx, task.ID, f.ids("gitlab"))
	require.NoError(t, err)
	got = f.exec.Applied(sess.ID).Orientation
	require.NotNil(t, got)
	assert.Equal(t, sess.ID+" read 2", got.Entries[0].Message, "the push carried the orientation as of the push")

	plain := newFaked(t, service.Options{})
	other := plain.launch(t, plain.task(t, "github").ID)
	assert.Nil(t, plain.exec.Applied(other.ID).Orientation)
}
