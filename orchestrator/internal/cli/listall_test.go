package cli

import (
	"errors"
	"math"
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

// TestPageAllFollowsEveryPage: a listing is asked for page after page,
// each as large as the server makes it, until a page names no next one
// (an orchestrator from before pages names none: its one response is the
// listing); a page that names itself as the next is an error, not a loop.
func TestPageAllFollowsEveryPage(t *testing.T) {
	pages := map[string][]string{"": {"a", "b"}, "p2": {"c"}, "p3": {"d", "e"}}
	nexts := map[string]string{"": "p2", "p2": "p3", "p3": ""}
	var asked []string
	got, err := pageAll(func(size int32, token string) ([]string, string, error) {
		assert.Equal(t, int32(math.MaxInt32), size, "the server's largest page")
		asked = append(asked, token)
		return pages[token], nexts[token], nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, got)
	assert.Equal(t, []string{"", "p2", "p3"}, asked)

	_, err = pageAll(func(int32, string) ([]string, string, error) { return []string{"a"}, "same", nil })
	assert.ErrorContains(t, err, `the server answered page "same" with itself as the next page`)
	boom := errors.New("unavailable")
	_, err = pageAll(func(_ int32, token string) ([]string, string, error) {
		if token == "" {
			return []string{"a"}, "p2", nil
		}
		return nil, "", boom
	})
	assert.ErrorIs(t, err, boom, "a failed page fails the listing: no part of it is shown as all of it")
}
