package periodic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/periodic"
)

// It calls fn each interval until ctx ends, and then returns nil at once.
func TestRunUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- periodic.Run(ctx, time.Millisecond, func(context.Context) error { calls <- struct{}{}; return nil })
	}()
	for range 3 {
		select {
		case <-calls:
		case <-time.After(time.Minute):
			t.Fatal("fn was not called")
		}
	}
	cancel()
	for {
		select {
		case <-calls: // a tick taken before the cancel
			continue
		case err := <-done:
			require.NoError(t, err)
			return
		case <-time.After(time.Minute):
			t.Fatal("Run did not return when its context ended")
		}
	}
}

// An error from fn ends the loop and is returned; fn got Run's context.
func TestRunStopsOnFnsError(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "mine")
	lost := errors.New("lease lost")
	n := 0
	err := periodic.Run(ctx, time.Millisecond, func(got context.Context) error {
		assert.Equal(t, "mine", got.Value(key{}))
		if n++; n == 2 {
			return lost
		}
		return nil
	})
	require.ErrorIs(t, err, lost)
	assert.Equal(t, 2, n)
}

// A context already ended: fn is never called.
func TestRunEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, periodic.Run(ctx, time.Nanosecond, func(context.Context) error {
		t.Error("fn called after the context ended")
		return nil
	}))
}
