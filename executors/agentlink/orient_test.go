package agentlink_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// TestOrientationTravelsWithLaunchesAndPushes: the orchestrator's
// orientation reaches the wire in a launch spec and in a surface; an
// absent one stays absent (agentctl keeps what it has), an empty one is
// sent (nothing to say now).
func TestOrientationTravelsWithLaunchesAndPushes(t *testing.T) {
	t.Parallel()
	o := &executors.Orientation{Entries: []toolapi.Orientation{{State: toolapi.OrientCredentialUnresolved, Provider: "github", Message: "fix it"}}}
	sf := agentlink.SurfaceOf(executors.Surface{Orientation: o})
	if assert.Len(t, sf.GetOrientation().GetEntries(), 1) {
		e := sf.GetOrientation().GetEntries()[0]
		assert.Equal(t, []string{toolapi.OrientCredentialUnresolved, "github", "", "fix it"}, []string{e.GetState(), e.GetProvider(), e.GetTool(), e.GetMessage()})
	}
	assert.Nil(t, agentlink.SurfaceOf(executors.Surface{}).GetOrientation())
	assert.NotNil(t, agentlink.SurfaceOf(executors.Surface{Orientation: &executors.Orientation{}}).GetOrientation())
	spec := agentlink.LaunchSpec(executors.Spec{SessionID: "s", Orientation: o})
	assert.Len(t, spec.GetOrientation().GetEntries(), 1)
	assert.Nil(t, agentlink.LaunchSpec(executors.Spec{SessionID: "s"}).GetOrientation())
}
