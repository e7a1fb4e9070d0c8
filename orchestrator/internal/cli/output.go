package cli

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/profiles"
)

// emit prints msg as JSON with --json, else calls human.
func (a *app) emit(msg proto.Message, human func(w io.Writer)) error {
	if a.json {
		b, err := marshalJSON(msg, "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	}
	return writeTable(a.stdout, human)
}

// writeTable runs print on a tabwriter, the one every table goes through,
// and writes its lines to w without trailing spaces.
func writeTable(w io.Writer, print func(w io.Writer)) error {
	if print == nil {
		return nil
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	print(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed := strings.TrimRight(line, " \t\n")
		out.WriteString(trimmed)
		if strings.HasSuffix(line, "\n") {
			out.WriteByte('\n')
		}
	}
	_, err := w.Write(out.Bytes())
	return err
}

func providerList(p *pb.ProviderSet) string {
	if len(p.GetProviders()) == 0 {
		return "none"
	}
	return strings.Join(p.GetProviders(), ",")
}

func repoName(r *pb.Repository) string {
	if r.GetHost() == "" {
		return r.GetPath()
	}
	return r.GetHost() + "/" + r.GetPath()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printWorkspace(w io.Writer, ws *pb.Workspace) {
	fmt.Fprintf(w, "workspace\t%s\t%s\n", ws.GetId(), ws.GetName())
	fmt.Fprintf(w, "  agent sources\t%s\n", policyName(ws.GetAgentSourcePolicy()))
	if len(ws.GetConnections()) == 0 {
		fmt.Fprintf(w, "  connections\tnone\n")
	}
	for _, c := range ws.GetConnections() {
		printConnection(w, c)
	}
}

func printConnection(w io.Writer, c *pb.Connection) {
	ref := "env " + c.GetCredential().GetEnvVar()
	if f := c.GetCredential().GetFilePath(); f != "" {
		ref = "file " + f
	}
	user := "not validated"
	if c.GetUsername() != "" {
		user = "as " + c.GetUsername()
	}
	fmt.Fprintf(w, "  %s\t%s\tcredential from %s\t%s\n", c.GetProvider(), c.GetApiBaseUrl(), ref, user)
}

func printRepositories(w io.Writer, repos []*pb.Repository) {
	fmt.Fprintln(w, "ID\tPROVIDER\tREPOSITORY\tREMOTE")
	for _, r := range repos {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.GetId(), orDash(r.GetProvider()), repoName(r), orDash(r.GetRemoteUrl()))
	}
}

func printTask(w io.Writer, t *pb.Task) {
	fmt.Fprintf(w, "task\t%s\t%s\n", t.GetId(), t.GetTitle())
	fmt.Fprintf(w, "  workspace\t%s\n", t.GetWorkspaceId())
	fmt.Fprintf(w, "  providers\t%s\t(generation %d)\n", providerList(t.GetProviderSet()), t.GetProviderSet().GetGeneration())
	fmt.Fprintf(w, "  repositories\n")
	for _, tr := range t.GetRepositories() {
		primary := ""
		if tr.GetPrimary() {
			primary = "primary"
		}
		r := tr.GetRepository()
		fmt.Fprintf(w, "    %d\t%s\t%s\t%s\t%s\n", tr.GetPosition(), r.GetId(), orDash(r.GetProvider()), repoName(r), primary)
	}
}

var sessionStates = map[pb.SessionState]string{
	pb.SessionState_SESSION_STATE_PENDING: "pending",
	pb.SessionState_SESSION_STATE_RUNNING: "running",
	pb.SessionState_SESSION_STATE_STOPPED: "stopped",
	pb.SessionState_SESSION_STATE_FAILED:  "failed",
}

var sessionModes = map[pb.SessionMode]string{
	pb.SessionMode_SESSION_MODE_TASK: "task",
	pb.SessionMode_SESSION_MODE_PLAN: "plan",
}

func printSessions(w io.Writer, list []*pb.Session) {
	fmt.Fprintln(w, "ID\tEXECUTOR\tMODE\tSTATE\tPROVIDERS\tSTATUS")
	for _, s := range list {
		repair := s.GetStatusMessage() // why it failed, or that its agent exited
		if s.GetNeedsRepair() {
			repair = "needs repair: " + repair
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s (gen %d)\t%s\n", s.GetId(), s.GetExecutor(), sessionModes[s.GetMode()],
			sessionStates[s.GetState()], providerList(s.GetPushedProviderSet()), s.GetPushedProviderSet().GetGeneration(), repair)
	}
}

// printSession prints one session as a row of the sessions table, its
// agent's profile, then its workspace: each repository's checkout, branch
// and last delivery.
func printSession(w io.Writer, s *pb.Session) {
	printSessions(w, []*pb.Session{s})
	if a := s.GetAgent(); a.GetProfile() == profiles.ClaudeCode || a.GetProfile() == profiles.Codex {
		auth := profiles.Spec{Profile: a.GetProfile(), Auth: a.GetAuth()}.AuthOf()
		fmt.Fprintf(w, "\nagent\t%s (model: %s; auth: %s)\n", a.GetProfile(), cmp.Or(a.GetModel(), "the agent's default"), auth)
	}
	if s.GetWorkspaceDir() == "" && len(s.GetCheckouts()) == 0 {
		return
	}
	if rm := s.GetWorkspaceRemoveTime(); rm != nil {
		fmt.Fprintf(w, "\nworkspace\t%s (removed at %s)\n", orDash(s.GetWorkspaceDir()), rm.AsTime().Local().Format(time.DateTime))
	} else {
		fmt.Fprintf(w, "\nworkspace\t%s\n", orDash(s.GetWorkspaceDir()))
	}
	fmt.Fprintln(w, "  REPOSITORY\tBRANCH\tCHECKOUT\tDELIVERED\tUNDELIVERED WORK")
	for _, c := range s.GetCheckouts() {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", c.GetKey(), c.GetBranch(), checkoutWhere(c), formatDelivered(c), formatWork(c.GetWork()))
	}
}

// printTaskCheckouts prints, after a task, its sessions' checkouts of its
// repositories, in the task's order of repositories, then the sessions'
// (oldest first): each one's branch, where it is, its last delivery and
// its work as the session's record has it (measured when it last
// stopped). Nothing when no session has a checkout.
func printTaskCheckouts(w io.Writer, t *pb.Task, sessions []*pb.Session) {
	type row struct {
		s *pb.Session
		c *pb.SessionCheckout
	}
	order := map[string]int{}
	names := map[string]string{}
	for i, tr := range t.GetRepositories() {
		order[tr.GetRepository().GetId()] = i
		names[tr.GetRepository().GetId()] = repoName(tr.GetRepository())
	}
	var rows []row
	for _, s := range sessions {
		for _, c := range s.GetCheckouts() {
			rows = append(rows, row{s, c})
		}
	}
	if len(rows) == 0 {
		return
	}
	rank := func(r row) int {
		if i, ok := order[r.c.GetRepositoryId()]; ok {
			return i
		}
		return len(order) // no longer the task's: last
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		if d := a.s.GetCreateTime().AsTime().Compare(b.s.GetCreateTime().AsTime()); d != 0 {
			return d
		}
		return strings.Compare(a.c.GetKey(), b.c.GetKey())
	})
	fmt.Fprintf(w, "  checkouts of its sessions\n")
	fmt.Fprintln(w, "    REPOSITORY\tSESSION\tSTATE\tBRANCH\tCHECKOUT\tDELIVERED\tUNDELIVERED WORK")
	for _, r := range rows {
		name := names[r.c.GetRepositoryId()]
		if name == "" {
			name = r.c.GetKey()
		}
		where := checkoutWhere(r.c)
		if rm := r.s.GetWorkspaceRemoveTime(); rm != nil && r.c.GetError() == "" {
			where = "removed at " + rm.AsTime().Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.s.GetId(), sessionStates[r.s.GetState()], r.c.GetBranch(),
			orDash(where), formatDelivered(r.c), formatWork(r.c.GetWork()))
	}
}

// checkoutWhere is where a checkout is, or why it was not made.
func checkoutWhere(c *pb.SessionCheckout) string {
	if c.GetError() != "" {
		return "not checked out: " + c.GetError()
	}
	return c.GetPath()
}

// formatDelivered is a checkout's last delivery: the commit the
// provider's branch points at, and when; "-" before any.
func formatDelivered(c *pb.SessionCheckout) string {
	if c.GetDeliveredCommit() == "" {
		return "-"
	}
	return fmt.Sprintf("%.12s at %s", c.GetDeliveredCommit(), c.GetDeliverTime().AsTime().Local().Format(time.DateTime))
}

// formatWork says what a checkout held that its remote lacked when
// measured, and when.
func formatWork(wk *pb.CheckoutWork) string {
	switch {
	case wk == nil:
		return "-"
	case wk.GetError() != "":
		return "unknown (" + wk.GetError() + ")"
	}
	at := wk.GetMeasureTime().AsTime().Local().Format(time.DateTime)
	if wk.GetUncommitted() == 0 && wk.GetUnpushed() == 0 {
		return "none, at " + at
	}
	return fmt.Sprintf("%d uncommitted, %d unpushed, at %s", wk.GetUncommitted(), wk.GetUnpushed(), at)
}

var eventKinds = map[pb.TaskEventKind]string{
	pb.TaskEventKind_TASK_EVENT_KIND_TASK_CREATED:               "task created",
	pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_ADDED:              "sources added",
	pb.TaskEventKind_TASK_EVENT_KIND_SESSION_STARTED:            "session started",
	pb.TaskEventKind_TASK_EVENT_KIND_SESSION_ENDED:              "session ended",
	pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED:               "agent exited",
	pb.TaskEventKind_TASK_EVENT_KIND_PROVIDERS_PUSHED:           "providers pushed",
	pb.TaskEventKind_TASK_EVENT_KIND_PROVIDERS_PUSH_FAILED:      "providers push failed",
	pb.TaskEventKind_TASK_EVENT_KIND_PROVIDERS_RECOMPUTED:       "providers recomputed",
	pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSHED:      "external tools pushed",
	pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSH_FAILED: "external tools push failed",
	pb.TaskEventKind_TASK_EVENT_KIND_TOOL_CALLED:                "tool called",
	pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_REQUESTED:          "sources requested",
	pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_REQUEST_DECIDED:    "source request decided",
}

func formatEvent(e *pb.TaskEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s  %s", e.GetSequence(), e.GetTime().AsTime().Local().Format("15:04:05.000"), eventKinds[e.GetKind()])
	if e.GetSessionId() != "" {
		fmt.Fprintf(&b, "  session=%s", e.GetSessionId())
	}
	if e.GetActor() != "" {
		fmt.Fprintf(&b, "  by=%s", e.GetActor())
	}
	if len(e.GetRepositoryIds()) > 0 {
		fmt.Fprintf(&b, "  repositories=%s", strings.Join(e.GetRepositoryIds(), ","))
	}
	if ps := e.GetProviderSet(); ps.GetGeneration() > 0 {
		fmt.Fprintf(&b, "  providers=%s gen=%d", providerList(ps), ps.GetGeneration())
	}
	if e.GetMessage() != "" {
		fmt.Fprintf(&b, "  %s", e.GetMessage())
	}
	return b.String()
}

// shellJoin is argv as one line a POSIX shell reads back as argv, for
// output meant to be copied (dry runs).
func shellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote is s as one shell word: as is when it holds only characters
// no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sessionStateNamed is the state a --state value names ("" names none).
func sessionStateNamed(name string) (pb.SessionState, bool) {
	if name == "" {
		return pb.SessionState_SESSION_STATE_UNSPECIFIED, true
	}
	for s, n := range sessionStates {
		if strings.EqualFold(strings.TrimSpace(name), n) {
			return s, true
		}
	}
	return 0, false
}
