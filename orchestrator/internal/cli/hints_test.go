package cli

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
)

func TestProviderTyposWarnWithTheNearestName(t *testing.T) {
	cases := map[string]string{
		"githb":    `toolscope: warning: provider "githb" is not one the task gets tools for (stored as given); did you mean "github"?` + "\n",
		"gitlba":   `did you mean "gitlab"?`,
		"GitHbu":   `did you mean "github"?`,
		" GitHub ": `provider " GitHub " is stored as given, spaces included; did you mean "github"?`,
		"github":   "",
		"GitLab":   "",
		"local":    "",
		"gitea":    "",
		"":         "",
	}
	for raw, want := range cases {
		var stderr bytes.Buffer
		(&app{stderr: &stderr}).warnProvider(raw)
		if want == "" {
			assert.Empty(t, stderr.String(), raw)
		} else {
			assert.Contains(t, stderr.String(), want, raw)
		}
		stderr.Reset()
		(&app{stderr: &stderr, quiet: true}).warnProvider(raw)
		assert.Empty(t, stderr.String(), "--quiet silences it: %q", raw)
	}
}

// TestShellQuoteReadsBack: a dry run's command line, given to a real sh,
// is the argv it was made from.
func TestShellQuoteReadsBack(t *testing.T) {
	argv := []string{"codex", "exec", "fix the login bug", "it's", `"quoted" $HOME` + "`id`", "", "a\nb", "--flag=x,y", "ünï", "*"}
	line := shellJoin(argv)
	out, err := exec.Command("sh", "-c", "set -- "+line+`; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
	require.NoError(t, err)
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	assert.Equal(t, argv, got)
	assert.Equal(t, "codex exec 'fix the login bug'", shellJoin(argv[:3]))
}

// TestTablesHaveNoTrailingSpaces: a last column left empty pads nothing.
func TestTablesHaveNoTrailingSpaces(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, writeTable(&out, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tSTATE\tSTATUS")
		fmt.Fprintln(w, "sess_1\trunning\t")
		fmt.Fprintln(w, "sess_22\tfailed\tagent exited")
	}))
	assert.Equal(t, "ID       STATE    STATUS\nsess_1   running\nsess_22  failed   agent exited\n", out.String())
}

// TestSourceAddPushRowsKeepTheirOwnColumns: a push row below the task's
// repositories does not widen their columns.
func TestSourceAddPushRowsKeepTheirOwnColumns(t *testing.T) {
	task := &pb.Task{Id: "task_1", Title: "fix", WorkspaceId: "ws_1", ProviderSet: &pb.ProviderSet{Providers: []string{"github"}, Generation: 2},
		Repositories: []*pb.TaskRepository{{Position: 1, Primary: true, Repository: &pb.Repository{Id: "repo_1", Provider: "github", Host: "github.com", Path: "acme/api"}}}}
	pushes := []*pb.SessionPush{{SessionId: "sess_1", Ok: true, Applied: &pb.ProviderSet{Providers: []string{"github"}, Generation: 2}}}
	var out bytes.Buffer
	require.NoError(t, writeTable(&out, func(w io.Writer) { printTask(w, task); printPushes(w, pushes) }))
	assert.Contains(t, out.String(), "\n    1  repo_1  github  github.com/acme/api  primary\n", out.String())
	assert.Contains(t, out.String(), "\n    pushed to session  sess_1  github (generation 2)\n", out.String())
}
