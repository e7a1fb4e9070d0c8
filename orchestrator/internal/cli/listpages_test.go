package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// TestTaskListShowsEveryPage replays the attack on `toolscope task list`
// against a real orchestrator: tasks of 4-byte characters ('𝕏') at the
// limits, enough of them to pass gRPC's 4 MiB together, are all listed,
// by the table and by --json, for every workspace and for one: the
// command line follows the API's pages. A description of 65,536 '𝕏'
// (once within the limit, counted in characters) is refused naming the
// flag and the limit in bytes.
func TestTaskListShowsEveryPage(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t)
	const wide = "𝕏"
	ws := strings.Fields(o.ok(t, "workspace", "create", "acme"))[1]
	var repo struct {
		Repository struct{ ID string } `json:"repository"`
	}
	o.json(t, &repo, "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/api")
	require.NotEmpty(t, repo.Repository.ID)

	_, stderr, code := o.run(t, "task", "create", "--workspace", ws, "--repo", repo.Repository.ID, "--title", "wide",
		"--description", strings.Repeat(wide, 65536))
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "invalid --description: is 262144 bytes long; the limit is 65536 bytes")

	title := strings.Repeat(wide, textlimit.Title.Max/len(wide))
	description := strings.Repeat(wide, textlimit.Text.Max/len(wide))
	n := 4<<20/(len(title)+len(description)) + 2
	var want []string
	for range n {
		var created struct {
			Task struct{ ID string } `json:"task"`
		}
		o.json(t, &created, "task", "create", "--workspace", ws, "--repo", repo.Repository.ID, "--title", title, "--description", description)
		want = append(want, created.Task.ID)
	}

	for _, args := range [][]string{{"task", "list"}, {"task", "list", "--workspace", ws}} {
		var listed struct {
			Tasks []struct {
				ID          string `json:"id"`
				Description string `json:"description"`
			} `json:"tasks"`
		}
		o.json(t, &listed, args...)
		var got []string
		for _, task := range listed.Tasks {
			got = append(got, task.ID)
			assert.Equal(t, description, task.Description)
		}
		assert.Equal(t, want, got, "%v --json: every task, in order", args)

		lines := strings.Split(strings.TrimSpace(o.ok(t, args...)), "\n")
		assert.Len(t, lines, 1+n, "%v: a header and a row per task", args)
	}
}
