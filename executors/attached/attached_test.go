package attached_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/attached"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

type session struct {
	attached.Session
	pid int
}

// gone is a held session whose agentctl ended, so that Stop asks it
// nothing (no link: the backends' suites stop sessions over real links).
func gone(id string, pid int) *session {
	s := &session{Session: attached.NewSession(id, nil), pid: pid}
	s.Exit.End("agentctl gone")
	return s
}

// TestLookup: a session not held, or held under the key but not the one
// the handle names (a relaunch), is ErrNotFound with the one text.
func TestLookup(t *testing.T) {
	var tab attached.Table[string, *session]
	_, err := tab.Lookup("s1", "agentctl (pid 7)", nil)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	assert.Equal(t, "agentctl (pid 7) is not attached to this orchestrator (re-attach first): not found", err.Error())

	s := gone("s1", 7)
	tab.Put("s1", s)
	got, err := tab.Lookup("s1", "agentctl (pid 7)", func(s *session) bool { return s.pid == 7 })
	require.NoError(t, err)
	assert.Same(t, s, got)
	_, err = tab.Lookup("s1", "agentctl (pid 8)", func(s *session) bool { return s.pid == 8 })
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

// TestLost: an end is a loss only for the session still held under its
// key and not being stopped.
func TestLost(t *testing.T) {
	var tab attached.Table[string, *session]
	old, relaunched := gone("s1", 1), gone("s1", 2)
	tab.Put("s1", old)
	assert.True(t, tab.Lost("s1", old))
	tab.Put("s1", relaunched)
	assert.False(t, tab.Lost("s1", old), "replaced by a relaunch")
	assert.True(t, tab.Lost("s1", relaunched))

	stopping := make(chan bool, 1)
	tab.Stop(context.Background(), relaunched, time.Second, func() { stopping <- tab.Lost("s1", relaunched) })
	assert.False(t, <-stopping, "an end while stopping is no loss")
	assert.False(t, tab.Lost("s1", relaunched), "nor after")
}

// TestStopDown: the endpoint's Down says lost before a stop and stopped
// after it, and the backend's part of the stop runs before the session is
// marked stopped.
func TestStopDown(t *testing.T) {
	var tab attached.Table[string, *session]
	s := gone("s1", 1)
	tab.Put("s1", s)
	ep := tab.Endpoint(s, nil)
	assert.Equal(t, "s1", ep.SessionID)
	phase, cause := ep.Down()
	assert.Equal(t, executors.PhaseLost, phase)
	assert.Equal(t, "agentctl gone", cause)
	assert.False(t, tab.Running("s1"), "gone")
	live := &session{Session: attached.NewSession("s2", nil)}
	tab.Put("s2", live)
	assert.True(t, tab.Running("s2"))
	assert.False(t, tab.Running("s3"), "not held")

	var during executors.Phase
	tab.Stop(context.Background(), s, time.Second, func() { during, _ = ep.Down() })
	assert.Equal(t, executors.PhaseLost, during, "not stopped before the backend's part ran")
	phase, _ = ep.Down()
	assert.Equal(t, executors.PhaseStopped, phase)
}

// TestReleaseDrain: Release lets go of the session it is given, never of
// one held under the key since; Drain of all.
func TestReleaseDrain(t *testing.T) {
	var tab attached.Table[string, *session]
	old, relaunched, other := gone("s1", 1), gone("s1", 2), gone("s2", 3)
	tab.Put("s1", relaunched)
	tab.Put("s2", other)
	tab.Release("s1", old)
	got, ok := tab.Get("s1")
	require.True(t, ok)
	assert.Same(t, relaunched, got)
	tab.Release("s1", relaunched)
	_, ok = tab.Get("s1")
	assert.False(t, ok)

	assert.Equal(t, []*session{other}, tab.Drain())
	_, err := tab.Lookup("s2", "pod x", nil)
	assert.True(t, errors.Is(err, errdefs.ErrNotFound))
	assert.Empty(t, tab.Drain())
}
