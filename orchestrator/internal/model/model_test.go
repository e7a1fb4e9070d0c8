package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestUndeliveredWorkIsNeverAssumedNone: a checkout whose work was never
// measured, or whose measure failed, may hold work; a checkout never made
// holds none; only a measure of nothing is nothing.
func TestUndeliveredWorkIsNeverAssumedNone(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c := Checkouts{Dir: "/w/s1", Repositories: []Checkout{
		{Key: "github.com/acme/clean", Branch: "b", Work: &Work{Head: "h", At: at}},
		{Key: "github.com/acme/never", Branch: "b"},
		{Key: "github.com/acme/failed", Branch: "b", Work: &Work{Error: "the branch is gone", At: at}},
		{Key: "github.com/acme/unmade", Branch: "b", Error: "fetch refused"},
		{Key: "github.com/acme/busy", Branch: "b", Work: &Work{Head: "h", Uncommitted: 2, Unpushed: 1, At: at}},
	}}
	assert.Equal(t, "github.com/acme/never (branch b): its work was never measured; "+
		"github.com/acme/failed (branch b): its work could not be measured (the branch is gone); "+
		"github.com/acme/busy (branch b): 2 uncommitted path(s) and 1 unpushed commit(s) at 2026-12-03T12:00:00Z", c.Undelivered())
	assert.Empty(t, Checkouts{Repositories: c.Repositories[:1]}.Undelivered())
	assert.Empty(t, Checkouts{Repositories: c.Repositories[3:4]}.Undelivered())
}
