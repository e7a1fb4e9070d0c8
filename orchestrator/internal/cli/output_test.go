package cli

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
)

// TestTaskGetShowsItsSessionsCheckouts: task get lists, under the task's
// repositories, each checkout its sessions have of them, in the task's
// order of repositories, then the sessions': branch, where it is (or why
// not, or that the workspace was removed), last delivery and the work
// recorded at the session's last stop ("-" when never measured, never
// "none"). A task whose sessions have no checkout prints as before.
func TestTaskGetShowsItsSessionsCheckouts(t *testing.T) {
	at := func(h int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 12, 3, h, 0, 0, 0, time.UTC))
	}
	task := &pb.Task{Id: "task_1", Title: "fix login", WorkspaceId: "ws_1", ProviderSet: &pb.ProviderSet{Providers: []string{"github"}, Generation: 2},
		Repositories: []*pb.TaskRepository{
			{Position: 0, Primary: true, Repository: &pb.Repository{Id: "repo_api", Provider: "github", Host: "github.com", Path: "acme/api"}},
			{Position: 1, Repository: &pb.Repository{Id: "repo_web", Provider: "github", Host: "github.com", Path: "acme/web"}},
		}}
	older := &pb.Session{Id: "sess_a", State: pb.SessionState_SESSION_STATE_STOPPED, CreateTime: at(1),
		WorkspaceDir: "/w/sess_a", WorkspaceRemoveTime: at(9),
		Checkouts: []*pb.SessionCheckout{
			{RepositoryId: "repo_web", Key: "github.com/acme/web", Path: "/w/sess_a/web", Branch: "toolscope/task_1/sess_a",
				Work: &pb.CheckoutWork{Error: "git status: exit status 128", MeasureTime: at(2)}},
			{RepositoryId: "repo_api", Key: "github.com/acme/api", Path: "/w/sess_a/api", Branch: "toolscope/task_1/sess_a",
				DeliveredCommit: "0123456789abcdef0123456789abcdef01234567", DeliverTime: at(3),
				Work: &pb.CheckoutWork{MeasureTime: at(4)}},
		}}
	newer := &pb.Session{Id: "sess_b", State: pb.SessionState_SESSION_STATE_RUNNING, CreateTime: at(5), WorkspaceDir: "/w/sess_b",
		Checkouts: []*pb.SessionCheckout{
			{RepositoryId: "repo_api", Key: "github.com/acme/api", Path: "/w/sess_b/api", Branch: "toolscope/task_1/sess_b",
				Work: &pb.CheckoutWork{Uncommitted: 2, Unpushed: 1, MeasureTime: at(6)}},
			{RepositoryId: "repo_web", Key: "github.com/acme/web", Branch: "toolscope/task_1/sess_b", Error: "the fetch was refused"},
			{RepositoryId: "repo_gone", Key: "gitlab.com/acme/old", Path: "/w/sess_b/old", Branch: "toolscope/task_1/sess_b"},
		}}
	hosted := &pb.Session{Id: "sess_h", State: pb.SessionState_SESSION_STATE_RUNNING, CreateTime: at(0)}

	local := func(ts *timestamppb.Timestamp) string { return ts.AsTime().Local().Format(time.DateTime) }
	var b strings.Builder
	require.NoError(t, writeTable(&b, func(w io.Writer) {
		printTask(w, task)
		printTaskCheckouts(w, task, []*pb.Session{hosted, newer, older})
	}))
	// Times are shown in local time, all of one width.
	want := strings.NewReplacer("{2}", local(at(2)), "{3}", local(at(3)), "{4}", local(at(4)), "{6}", local(at(6)), "{9}", local(at(9))).Replace(`task         task_1  fix login
  workspace  ws_1
  providers  github  (generation 2)
  repositories
    0  repo_api  github  github.com/acme/api  primary
    1  repo_web  github  github.com/acme/web
  checkouts of its sessions
    REPOSITORY           SESSION  STATE    BRANCH                   CHECKOUT                                DELIVERED                            UNDELIVERED WORK
    github.com/acme/api  sess_a   stopped  toolscope/task_1/sess_a  removed at {9}          0123456789ab at {3}  none, at {4}
    github.com/acme/api  sess_b   running  toolscope/task_1/sess_b  /w/sess_b/api                           -                                    2 uncommitted, 1 unpushed, at {6}
    github.com/acme/web  sess_a   stopped  toolscope/task_1/sess_a  removed at {9}          -                                    unknown (git status: exit status 128)
    github.com/acme/web  sess_b   running  toolscope/task_1/sess_b  not checked out: the fetch was refused  -                                    -
    gitlab.com/acme/old  sess_b   running  toolscope/task_1/sess_b  /w/sess_b/old                           -                                    -
`)
	assert.Equal(t, want, b.String())

	// No checkout: the task alone, as before.
	b.Reset()
	require.NoError(t, writeTable(&b, func(w io.Writer) { printTaskCheckouts(w, task, []*pb.Session{hosted}) }))
	assert.Empty(t, b.String())
}
