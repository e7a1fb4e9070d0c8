package cli

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestListAllIsOneCallOrOnePerParent: a listing of one parent is one call;
// of every parent, one call with the wildcard, or, when the orchestrator
// answers not_found for it (it predates the wildcard), one call per
// parent, in the parents' order; any other failure is the listing's.
func TestListAllIsOneCallOrOnePerParent(t *testing.T) {
	items := map[string][]string{"ws_a": {"a1", "a2"}, "ws_b": {"b1"}}
	var asked []string
	list := func(wildcard bool) func(string) ([]string, error) {
		return func(parent string) ([]string, error) {
			asked = append(asked, parent)
			if parent == model.Every {
				if !wildcard {
					return nil, errdefs.NotFound("workspace", parent)
				}
				return []string{"a1", "a2", "b1"}, nil
			}
			return items[parent], nil
		}
	}
	parents := func() ([]string, error) { return []string{"ws_a", "ws_b"}, nil }

	got, err := listAll("ws_b", list(true), parents)
	require.NoError(t, err)
	assert.Equal(t, []string{"b1"}, got)
	assert.Equal(t, []string{"ws_b"}, asked)

	asked = nil
	got, err = listAll("", list(true), parents)
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2", "b1"}, got)
	assert.Equal(t, []string{model.Every}, asked, "one call")

	asked = nil
	got, err = listAll("", list(false), parents)
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2", "b1"}, got)
	assert.Equal(t, []string{model.Every, "ws_a", "ws_b"}, asked, "an orchestrator from before the wildcard")

	boom := errors.New("unavailable")
	_, err = listAll("", func(string) ([]string, error) { return nil, boom }, parents)
	assert.ErrorIs(t, err, boom, "not a reason to list one by one")
	_, err = listAll("", list(false), func() ([]string, error) { return nil, boom })
	assert.ErrorIs(t, err, boom)
}
