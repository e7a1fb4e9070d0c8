// Package local runs each session's agentctl as a child process of the
// orchestrator, in its own process group, on loopback.
//
// Launch writes a per-launch secret to a file only the owner can read,
// starts `agentctl serve --listen 127.0.0.1:0 --secret-file ...`, waits for
// its readiness line (no polling), creates the session and opens the Attach
// stream. The process's exit is noticed at once (the orchestrator waits on
// its child). The handle records the pid, address and the secret file's
// path — a reference, never the secret — so a restarted orchestrator can
// re-attach; agentctl survives an orchestrator restart because it runs in
// its own process group.
package local

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/executors/attached"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/procs"
	"github.com/toolscope/toolscope/internal/profiles"
)

// Name is the backend's name.
const Name = "local"

const stateVersion = 1

// Options configure the local backend.
type Options struct {
	// Agentctl is the path of the agentctl binary.
	Agentctl string
	// StateDir holds one directory per session (secret file, agentctl's
	// state), removed when the session's agentctl ends.
	StateDir string
	// LogsDir holds one directory per session with its logs (agentctl.log,
	// and agent.log once agentctl ended), kept after the session stops;
	// default: "logs" beside StateDir.
	LogsDir string
	// WorkspacesDir holds the sessions' workspaces (agentctl
	// --workspaces-dir), kept after they stop, and MirrorsDir the
	// repositories' mirrors, shared by every session (--mirrors-dir);
	// default: "workspaces" and "mirrors" beside StateDir. Agents under
	// uids of their own must be able to traverse WorkspacesDir's parents.
	WorkspacesDir, MirrorsDir string
	// ReadyTimeout bounds the wait for agentctl's readiness line.
	ReadyTimeout time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// AgentUIDs is the range the sessions' agents run under, one uid per
	// session (agentctl --agent-uids), so that an agent can read neither
	// its agentctl's secret nor another session's files. It needs root;
	// when the orchestrator runs as root and it is unset, it is
	// agentuid.Default. A non-root orchestrator cannot isolate: agents
	// run as its user (docs/security.md).
	AgentUIDs agentuid.Range
	// AgentctlFlags are the bounds each agentctl is started with; LogBacklog
	// also bounds what AgentctlLog sends before following (1 MiB if
	// zero).
	AgentctlFlags  executors.AgentctlFlags
	Calls          executors.CallHandler
	Events         executors.EventHandler
	OrchestratorID string
	Log            *slog.Logger
}

// state is what the handle records.
type state struct {
	SessionID  string `json:"session_id"`
	PID        int    `json:"pid"`
	Addr       string `json:"addr"`
	SecretFile string `json:"secret_file"`
	Dir        string `json:"dir"`
	// AgentUID is the uid the session's agent runs under (0: agentctl's
	// own); SessionsDir, then, holds its session directory, outside Dir,
	// which the agent cannot enter.
	AgentUID    uint32 `json:"agent_uid,omitempty"`
	SessionsDir string `json:"sessions_dir,omitempty"`
	// LogDir holds the session's logs, kept after it stops (empty in
	// handles from before it existed: the logs were in Dir).
	LogDir string `json:"log_dir,omitempty"`
}

// logDir is where the session's logs are.
func (st state) logDir() string {
	if st.LogDir != "" {
		return st.LogDir
	}
	return st.Dir
}

// Executor is the local backend.
type Executor struct {
	opts Options

	sessions attached.Table[string, *session] // by session id
}

// session is a held session; its Exit ends when the process is known to
// be gone, and its Link is set once agentctl is ready (Table.SetLink).
type session struct {
	attached.Session
	st    state
	child *exec.Cmd     // nil after a re-attach (not our child)
	done  chan struct{} // closed when the orchestrator lets go of the session
	once  sync.Once
}

func (s *session) release() { s.once.Do(func() { close(s.done) }) }

// New returns the local backend.
func New(opts Options) (*Executor, error) {
	if opts.Agentctl == "" {
		return nil, errdefs.RequiredField("agentctl")
	}
	if _, err := os.Stat(opts.Agentctl); err != nil {
		return nil, fmt.Errorf("agentctl binary %s: %w", opts.Agentctl, err)
	}
	if opts.StateDir == "" {
		return nil, errdefs.RequiredField("state_dir")
	}
	if opts.LogsDir == "" {
		opts.LogsDir = filepath.Join(filepath.Dir(filepath.Clean(opts.StateDir)), "logs")
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if !opts.AgentUIDs.Set() && os.Geteuid() == 0 {
		opts.AgentUIDs = agentuid.Default
	}
	opts.WorkspacesDir = cmp.Or(opts.WorkspacesDir, filepath.Join(filepath.Dir(opts.StateDir), "workspaces"))
	opts.MirrorsDir = cmp.Or(opts.MirrorsDir, filepath.Join(filepath.Dir(opts.StateDir), "mirrors"))
	if opts.AgentUIDs.Set() && os.Geteuid() != 0 {
		return nil, errdefs.InvalidField("agent_uids", "needs the orchestrator to run as root (it runs as uid %d)", os.Geteuid())
	}
	return &Executor{opts: opts}, nil
}

// agentUID claims a uid of the range no session on this host holds (a
// host-wide claim, agentuid.Claim: orchestrators sharing a host never
// share one), from a random offset. Zero: agents run as the
// orchestrator's user.
func (e *Executor) agentUID() (uint32, error) {
	r := e.opts.AgentUIDs
	if !r.Set() {
		return 0, nil
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	// Every uid held is errdefs.ErrResourceExhausted (the local session
	// limit), a directory of claims that cannot be trusted
	// errdefs.ErrFailedPrecondition.
	return agentuid.Claim(r, binary.BigEndian.Uint32(b[:]))
}

// Name implements executors.Executor.
func (e *Executor) Name() string { return Name }

// Preflight implements executors.Preflighter: the agent starts on this
// machine, with the environment Launch gives agentctl.
func (e *Executor) Preflight(_ context.Context, spec executors.Spec) error {
	if spec.Agent == nil {
		return nil
	}
	return profiles.Preflight(spec.Agent.ProfileSpec(), spec.Agent.WorkDir, spec.AgentctlEnv(os.Environ()))
}

// Launch implements executors.Executor.
func (e *Executor) Launch(ctx context.Context, spec executors.Spec, progress executors.Progress) (executors.Handle, executors.Status, error) {
	if err := spec.Validate(); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	if e.sessions.Running(spec.SessionID) {
		return executors.Handle{}, executors.Status{}, errdefs.AlreadyExists("session %q is already running", spec.SessionID)
	}

	dir := filepath.Join(e.opts.StateDir, spec.SessionID)
	_ = os.RemoveAll(dir) // a relaunch starts clean
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	logDir := filepath.Join(e.opts.LogsDir, spec.SessionID)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return executors.Handle{}, executors.Status{}, err
	}
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(newSecret()), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return executors.Handle{}, executors.Status{}, err
	}
	var err error
	st := state{SessionID: spec.SessionID, SecretFile: secretFile, Dir: dir, LogDir: logDir}
	if st.AgentUID, err = e.agentUID(); err != nil {
		e.retire(st)
		return executors.Handle{}, executors.Status{}, err
	}
	if st.AgentUID != 0 {
		// From here on the uid is held until releaseAgent.
		// The agent reaches its own session directory through this one
		// (mode 0711: entered, never listed); the state directory, with
		// the secret, stays closed to it.
		// Named with this process's pid, so that the test guard
		// (testutil.SessionsDirPattern) attributes it exactly.
		if st.SessionsDir, err = os.MkdirTemp("", fmt.Sprintf("toolscope-sessions-%d-", os.Getpid())); err != nil {
			e.releaseAgent(st)
			return executors.Handle{}, executors.Status{}, err
		}
		if err := os.Chmod(st.SessionsDir, 0o711); err != nil {
			e.releaseAgent(st)
			return executors.Handle{}, executors.Status{}, err
		}
	}
	progress.Report("starting agentctl")
	s, err := e.start(ctx, st, spec.AgentctlEnv(os.Environ()))
	if err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	fail := func(err error) (executors.Handle, executors.Status, error) {
		e.kill(s)
		return executors.Handle{}, executors.Status{}, err
	}
	progress.Report("agentctl ready on %s; %s", s.st.Addr, spec.Creating())
	status, err := s.Link.CreateSession(ctx, spec)
	if err != nil {
		return fail(fmt.Errorf("create session in agentctl: %w", err))
	}
	if err := s.Link.WaitAttached(ctx); err != nil {
		return fail(fmt.Errorf("attach to agentctl: %w", err))
	}
	e.sessions.Put(spec.SessionID, s)
	return executors.Handle{Backend: Name, Version: stateVersion, State: executors.EncodeState(s.st)}, status, nil
}

// start runs agentctl with env and waits for its readiness line. When
// it fails before agentctl runs, it releases the session's agent uid;
// after, agentctl's end does.
func (e *Executor) start(ctx context.Context, st state, env []string) (*session, error) {
	id, dir := st.SessionID, st.Dir
	logFile, err := os.OpenFile(filepath.Join(st.logDir(), "agentctl.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		e.releaseAgent(st)
		return nil, err
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", st.SecretFile, "--state-dir", filepath.Join(dir, "agentctl")}
	if st.LogDir != "" {
		// A stopped session's agent.log goes beside its agentctl.log.
		args = append(args, "--logs-dir", filepath.Dir(st.LogDir))
	}
	// The orchestrator bounds the logs directory it shares between its
	// sessions (toolscope serve --logs-max-bytes); an agentctl sees its
	// own sessions only.
	args = append(args, "--logs-max-bytes", "0", "--logs-max-age", "0")
	args = append(args, "--workspaces-dir", e.opts.WorkspacesDir, "--mirrors-dir", e.opts.MirrorsDir)
	args = append(args, e.opts.AgentctlFlags.Args()...)
	if st.AgentUID != 0 {
		args = append(args, "--agent-uids", agentuid.Single(st.AgentUID).String(), "--sessions-dir", st.SessionsDir)
	}
	cmd := exec.Command(e.opts.Agentctl, args...)
	cmd.Env = env
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = logFile.Close()
		e.releaseAgent(st)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		e.releaseAgent(st)
		return nil, fmt.Errorf("start agentctl %s: %w", e.opts.Agentctl, err)
	}
	st.PID = cmd.Process.Pid
	if st.AgentUID != 0 {
		agentuid.Hold(st.AgentUID, st.PID) // the claim lives as long as agentctl
	}
	s := &session{Session: attached.NewSession(id, nil), child: cmd, done: make(chan struct{}), st: st}
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		e.releaseAgent(st)
		s.Exit.End(fmt.Sprintf("agentctl (pid %d) exited: %v", cmd.Process.Pid, exitText(err)))
		e.opts.Log.Warn("agentctl exited", "session_id", id, "pid", cmd.Process.Pid, "error", err)
		e.sessions.CloseLink(s)
		e.lost(s)
	}()

	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(e.opts.ReadyTimeout)
	defer timer.Stop()
	var line string
	select {
	case line = <-ready:
	case <-s.Exit.Done():
		return nil, fmt.Errorf("agentctl exited before it was ready (%s); its log: %s", s.Exit.Cause(), tail(filepath.Join(st.logDir(), "agentctl.log")))
	case <-timer.C:
		e.kill(s)
		return nil, fmt.Errorf("agentctl was not ready within %s: %w", e.opts.ReadyTimeout, errdefs.ErrUnavailable)
	case <-ctx.Done():
		e.kill(s)
		return nil, context.Cause(ctx)
	}
	var r struct {
		Addr string `json:"addr"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Addr == "" {
		e.kill(s)
		return nil, fmt.Errorf("agentctl printed %q instead of its readiness line; is %s an agentctl binary for this machine? log: %s",
			strings.TrimSpace(line), e.opts.Agentctl, tail(filepath.Join(st.logDir(), "agentctl.log")))
	}
	s.st.Addr = r.Addr
	link, err := e.dial(s.st)
	if err != nil {
		e.kill(s)
		return nil, err
	}
	e.sessions.SetLink(s, link)
	if s.Exit.Gone() {
		e.sessions.CloseLink(s) // it exited while we dialed: nothing to redial
	}
	return s, nil
}

func (e *Executor) dial(st state) (*agentlink.Link, error) {
	secret, err := os.ReadFile(st.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("read the agentctl secret file: %w", err)
	}
	return agentlink.Dial(agentlink.Options{
		Addr: st.Addr, Secret: strings.TrimSpace(string(secret)), Calls: e.opts.Calls, Events: e.opts.Events,
		OrchestratorID: e.opts.OrchestratorID, Log: e.opts.Log,
	})
}

// lookup returns the session of h, loading it from the handle after an
// orchestrator restart only through Reattach.
func (e *Executor) lookup(h executors.Handle) (*session, error) {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return nil, err
	}
	// A relaunch holds a new agentctl under the same session id.
	return e.sessions.Lookup(st.SessionID, fmt.Sprintf("agentctl (pid %d)", st.PID),
		func(s *session) bool { return s.st.PID == st.PID && s.st.Addr == st.Addr })
}

// Endpoint implements executors.Executor.
func (e *Executor) Endpoint(h executors.Handle) (executors.Endpoint, error) {
	s, err := e.lookup(h)
	if err != nil {
		return executors.Endpoint{}, err
	}
	return e.sessions.Endpoint(s, func(st *executors.Status) {
		st.StdioCommand = []string{e.opts.Agentctl, "mcp", "--config", filepath.Join(s.st.sessionsDir(), s.ID, "bridge.json")}
	}), nil
}

// Bounds of a log read, as agentctl's ReadAgentLog has them: each
// message, and how often a follower looks for more.
const (
	logChunk = 32 << 10
	logPoll  = 100 * time.Millisecond
)

// AgentctlLog implements executors.AgentctlLogReader: the agentctl.log the
// executor writes in the session's logs directory, kept after it stops.
// Following it ends once that agentctl no longer runs.
func (e *Executor) AgentctlLog(ctx context.Context, h executors.Handle, follow bool, fn func([]byte) error) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	return e.readLog(ctx, filepath.Join(st.logDir(), "agentctl.log"), "agentctl log", st, follow, fn)
}

// KeptAgentLog implements executors.KeptAgentLogReader: the agent.log
// kept in the session's logs directory once its agentctl ended.
func (e *Executor) KeptAgentLog(ctx context.Context, h executors.Handle, fn func([]byte) error) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	return e.readLog(ctx, filepath.Join(st.logDir(), "agent.log"), "kept agent log", st, false, fn)
}

// readLog sends the log file at path's last bytes (the log backlog), then,
// with follow, what is written to it until the session's agentctl no
// longer runs or ctx ends.
func (e *Executor) readLog(ctx context.Context, path, what string, st state, follow bool, fn func([]byte) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return errdefs.NotFound(what+" of session", st.SessionID)
	} else if err != nil {
		return err
	}
	defer f.Close()
	backlog := cmp.Or(e.opts.AgentctlFlags.LogBacklog, 1<<20)
	if info, err := f.Stat(); err == nil && info.Size() > backlog {
		if _, err := f.Seek(info.Size()-backlog, io.SeekStart); err != nil {
			return err
		}
	}
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	buf := make([]byte, logChunk)
	ended := false // agentctl was seen gone: one more read takes its last words
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if err := fn(buf[:n]); err != nil {
				return err
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if !follow || ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		ended = !procs.Alive(st.PID)
	}
}

// sessionsDir is where agentctl keeps the session's directory.
func (st state) sessionsDir() string {
	if st.SessionsDir != "" {
		return st.SessionsDir
	}
	return filepath.Join(st.Dir, "agentctl", "sessions")
}

// releaseAgent runs once agentctl is gone (or never started): it ends
// whatever still runs under the session's agent uid (an agent outlives an
// agentctl killed with its process group), removes the session's
// directories (retire), and frees the uid.
func (e *Executor) releaseAgent(st state) {
	if st.AgentUID != 0 {
		agentuid.End(st.AgentUID)
		// The session's workspace outlives it; its agentctl took it back
		// from the uid at a stop, but not if it ended otherwise: the uid
		// serves later sessions, which must not reach it.
		ws := filepath.Join(e.opts.WorkspacesDir, st.SessionID)
		if err := os.Lchown(ws, os.Geteuid(), os.Getegid()); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.opts.Log.Warn("taking back a session's workspace", "session_id", st.SessionID, "dir", ws, "error", err)
		}
	}
	e.retire(st)
	if st.AgentUID != 0 {
		agentuid.Release(st.AgentUID)
	}
}

// retire removes the directories of a session whose agentctl is gone,
// since they hold its secrets: the launch secret first, then the state
// directory (agentctl's session directory with mcp.json, bridge.json and
// the profile files holding the MCP bearer token) and the directory made
// for the agent. The agent's log is kept first, in the logs directory,
// beside agentctl.log. Nothing runs there any more, so nothing writes
// a secret back.
func (e *Executor) retire(st state) {
	if st.LogDir != "" {
		// The agent's log, its rotated part first (agentctl serve
		// --agent-log-max-bytes), if agentctl did not keep it.
		from := filepath.Join(st.sessionsDir(), st.SessionID, "agent.log")
		keepLog(from+".1", filepath.Join(st.LogDir, "agent.log"))
		keepLog(from, filepath.Join(st.LogDir, "agent.log"))
	}
	if st.SecretFile != "" {
		if err := os.Remove(st.SecretFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.opts.Log.Warn("removing a session's secret file", "session_id", st.SessionID, "error", err)
		}
	}
	dirs := []string{st.SessionsDir, st.Dir}
	if st.LogDir == "" {
		// A handle from before the logs directory: its agentctl.log is in
		// Dir, and stays.
		dirs[1] = filepath.Join(st.Dir, "agentctl")
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			e.opts.Log.Warn("removing a session's directory", "session_id", st.SessionID, "dir", dir, "error", err)
		}
	}
}

// keepLog appends the log at from, if any, to the one at to.
func keepLog(from, to string) {
	src, err := os.Open(from)
	if err != nil {
		return
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer dst.Close()
	_, _ = io.Copy(dst, src)
}

// Stop implements executors.Executor: the session, then its agentctl.
func (e *Executor) Stop(ctx context.Context, h executors.Handle) error {
	s, err := e.lookup(h)
	if errors.Is(err, errdefs.ErrNotFound) {
		// Not attached to this orchestrator (re-attaching failed: it was
		// frozen, say): its agentctl may still run.
		var st state
		if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
			return err
		}
		if !e.owns(st) && procs.Alive(st.PID) {
			// A copy of another installation's database (ADR 0014): its
			// agentctl and its directories are that installation's.
			return errdefs.FailedPrecondition("the agentctl of session %s (pid %d) runs for another orchestrator installation: its state is in %s, outside this orchestrator's %s; stop the session there (docs/operations.md, restoring a backup)",
				st.SessionID, st.PID, st.Dir, e.opts.StateDir)
		}
		e.killDetached(st)
		if !procs.Alive(st.PID) {
			e.retire(st) // gone before, or ended now: its secrets go too
		}
		return nil
	} else if err != nil {
		return err
	}
	e.sessions.Stop(ctx, s, e.opts.StopGrace, func() {
		e.kill(s)
		s.release()
	})
	return nil
}

// RemoveWorkspace implements executors.WorkspaceRemover: the session's
// directory in WorkspacesDir, with the checkouts its agents left (their
// files the agents' uids'), once no agentctl of the session runs.
func (e *Executor) RemoveWorkspace(_ context.Context, h executors.Handle, dir string) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	if st.SessionID == "" || st.SessionID != filepath.Base(st.SessionID) || strings.HasPrefix(st.SessionID, ".") {
		return errdefs.InvalidField("handle.session_id", "%q is not a session id", st.SessionID)
	}
	own := filepath.Join(e.opts.WorkspacesDir, st.SessionID)
	if filepath.Clean(dir) != own {
		return errdefs.FailedPrecondition("session %s's workspace %s is not in this orchestrator's workspaces directory %s (toolscope serve --workspaces-dir changed?): remove it by hand",
			st.SessionID, dir, e.opts.WorkspacesDir)
	}
	if e.sessions.Running(st.SessionID) || (!e.owns(st) && procs.Alive(st.PID)) {
		return errdefs.FailedPrecondition("session %s runs: stop it first", st.SessionID)
	}
	return os.RemoveAll(own)
}

// owns reports whether a handle's session directory is in this
// executor's state directory: whether this installation started it.
func (e *Executor) owns(st state) bool {
	rel, err := filepath.Rel(e.opts.StateDir, st.Dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// killDetached ends the agentctl of a session this orchestrator does not
// hold, if it still runs — its process group, then whatever runs under
// the session's agent uid — and releases the uid. The pid is checked to
// be that session's agentctl (its command line names the session's
// secret file), never a process that reused the pid.
func (e *Executor) killDetached(st state) {
	if !procs.Alive(st.PID) {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID))
	if err != nil || st.SecretFile == "" || !slices.Contains(strings.Split(string(cmdline), "\x00"), st.SecretFile) {
		return
	}
	e.opts.Log.Warn("ending the agentctl of a session this orchestrator does not hold", "session_id", st.SessionID, "pid", st.PID)
	_ = syscall.Kill(-st.PID, syscall.SIGTERM)
	_ = syscall.Kill(-st.PID, syscall.SIGCONT) // a frozen agentctl gets its SIGTERM
	deadline := time.Now().Add(e.opts.StopGrace)
	for procs.Alive(st.PID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // not our child: nothing to wait on
	}
	_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	e.releaseAgent(st)
}

// lost reports a session whose agentctl ended on its own: one this
// executor launched or re-attached, still holds, and was not stopping.
func (e *Executor) lost(s *session) {
	if e.sessions.Lost(s.ID, s) && e.opts.Events != nil {
		e.opts.Events(executors.SessionEvent{SessionID: s.ID, Kind: executors.EventLost, Message: s.Exit.Cause()})
	}
}

// kill ends agentctl's process group: SIGTERM, then SIGKILL after grace.
func (e *Executor) kill(s *session) {
	e.sessions.CloseLink(s)
	if s.Exit.Gone() {
		return
	}
	_ = syscall.Kill(-s.st.PID, syscall.SIGTERM)
	select {
	case <-s.Exit.Done():
		return
	case <-time.After(e.opts.StopGrace):
	}
	_ = syscall.Kill(-s.st.PID, syscall.SIGKILL)
	<-s.Exit.Done()
}

// Reattach implements executors.Executor: it takes over an agentctl that
// an earlier orchestrator started. Its death is then noticed when its
// Attach stream breaks and the process is gone.
func (e *Executor) Reattach(ctx context.Context, h executors.Handle) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	if s, err := e.lookup(h); err == nil && !s.Exit.Gone() {
		return nil // already attached
	}
	if !procs.Alive(st.PID) {
		return fmt.Errorf("agentctl (pid %d) is not running: %w", st.PID, executors.ErrLost)
	}
	link, err := e.dial(st)
	if err != nil {
		return err
	}
	// This agentctl was started for this session: the link may carry it.
	if err := attached.Adopt(ctx, link, st.SessionID, "agentctl at "+st.Addr); err != nil {
		_ = link.Close()
		return err
	}
	s := &session{Session: attached.NewSession(st.SessionID, link), st: st, done: make(chan struct{})}
	e.sessions.Put(s.ID, s)
	go e.watch(s)
	return nil
}

// watch notices the death of a re-attached agentctl (not our child): the
// process disappears. It checks on a short interval, since only a parent
// can wait for a process.
func (e *Executor) watch(s *session) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if !procs.Alive(s.st.PID) {
			e.releaseAgent(s.st)
			s.Exit.End(fmt.Sprintf("agentctl (pid %d) is gone", s.st.PID))
			e.sessions.CloseLink(s)
			e.lost(s)
			return
		}
	}
}

// Close implements executors.Executor: it drops the connections; the
// agentctl processes keep running for the next orchestrator to re-attach.
func (e *Executor) Close() error {
	for _, s := range e.sessions.Drain() {
		s.release()
	}
	return nil
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return "(empty)"
	}
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return strings.TrimSpace(string(b))
}
