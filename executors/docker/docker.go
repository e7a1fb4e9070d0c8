// Package docker runs each session in a container of the user's image,
// through the Docker Engine API (the official client, API version
// negotiated, so Debian's docker.io engine at API 1.41 and current engines
// both work).
//
// The host's static agentctl is bind-mounted read-only and is the
// container's entrypoint (`agentctl serve`); it starts the agent inside the
// container. agentctl's gRPC port and the session's MCP port are published
// on 127.0.0.1 only. agentctl runs as root in the container and the agent
// under a uid of its own (agentuid.Default's first), so the per-launch
// secret, a read-only bind-mounted file readable by root alone, and
// agentctl's /proc entries are out of the agent's reach. The container's
// environment is the agent's allowlist (profiles.Allowed) without the base
// variables, which stay the image's. Containers carry labels (toolscope.session,
// toolscope.task) so a restarted orchestrator finds, re-attaches or cleans
// them. A container's death is noticed at once (the engine's wait API).
//
// A session's workspace (ADR 0038) is on the host, in
// Options.WorkspacesDir/<session>, bind-mounted at the same name under
// /toolscope/workspaces: it outlives the container, a resumed session's
// new container finds it again, and `session clean` removes it
// (RemoveWorkspace). The repositories' mirrors are one host directory,
// Options.MirrorsDir, shared by the containers' agentctls (root in their
// containers; the directory is closed to agents). Each container sees
// only its own session's workspace; a checkout's objects are copied from
// the mirror, not hard-linked (a bind mount is a mount of its own). The
// image needs git for checkouts; without it they fail, named, and the
// session starts without them.
package docker

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/executors/attached"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
)

// Name is the backend's name.
const Name = "docker"

// Labels on every container this backend creates.
const (
	LabelManaged      = "toolscope.managed"
	LabelOrchestrator = "toolscope.orchestrator" // Options.OrchestratorID: whose container it is
	LabelSession      = "toolscope.session"
	LabelTask         = "toolscope.task"
)

const (
	stateVersion = 1
	grpcPort     = "7077"
	mcpPort      = "7078"
	mountDir     = "/toolscope"
	// Where the container's agentctl keeps workspaces and mirrors: bind
	// mounts of Options.WorkspacesDir/<session> and Options.MirrorsDir.
	containerWorkspaces = mountDir + "/workspaces"
	containerMirrors    = mountDir + "/mirrors"
)

// Options configure the docker backend.
type Options struct {
	// Agentctl is the host path of a static agentctl binary for the
	// containers' architecture.
	Agentctl string
	// StateDir holds each session's secret file on the host.
	StateDir string
	// WorkspacesDir holds the sessions' workspaces on the host, kept after
	// their containers end (DIR(StateDir)/workspaces if empty); MirrorsDir
	// the repositories' mirrors the containers' agentctls fetch
	// (DIR(StateDir)/docker-mirrors if empty). Both are created if missing.
	WorkspacesDir, MirrorsDir string
	// Client talks to the engine; if nil, one is built from the
	// environment (DOCKER_HOST, ...) with API version negotiation.
	Client       *client.Client
	ReadyTimeout time.Duration
	StopGrace    time.Duration
	Calls        executors.CallHandler
	Events       executors.EventHandler
	// OrchestratorID labels the containers this orchestrator creates;
	// Managed and Sweep see only those, so orchestrators sharing an engine
	// never touch each other's containers. Required.
	OrchestratorID string
	// AgentctlFlags are the bounds each container's agentctl is started
	// with.
	AgentctlFlags executors.AgentctlFlags
	// LogTailLines bounds what AgentctlLog sends before following: the
	// engine keeps a container's output by lines. DefaultLogTailLines if
	// zero.
	LogTailLines int
	Log          *slog.Logger
}

// DefaultLogTailLines is Options.LogTailLines unless set.
const DefaultLogTailLines = 5000

type state struct {
	SessionID   string `json:"session_id"`
	ContainerID string `json:"container_id"`
	SecretFile  string `json:"secret_file"`
}

// Executor is the docker backend.
type Executor struct {
	opts Options
	cli  *client.Client

	sessions attached.Table[string, *session] // by container id
}

type session struct {
	attached.Session
	st     state
	mcpURL string // as reachable from the host
	cancel context.CancelFunc
}

// New returns the docker backend.
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
	if opts.OrchestratorID == "" {
		return nil, errdefs.RequiredField("orchestrator_id")
	}
	opts.WorkspacesDir = cmp.Or(opts.WorkspacesDir, filepath.Join(filepath.Dir(opts.StateDir), "workspaces"))
	opts.MirrorsDir = cmp.Or(opts.MirrorsDir, filepath.Join(filepath.Dir(opts.StateDir), "docker-mirrors"))
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.LogTailLines <= 0 {
		opts.LogTailLines = DefaultLogTailLines
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	cli := opts.Client
	if cli == nil {
		var err error
		if cli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err != nil {
			return nil, fmt.Errorf("docker client: %w", err)
		}
	}
	return &Executor{opts: opts, cli: cli}, nil
}

// Name implements executors.Executor.
func (e *Executor) Name() string { return Name }

// Launch implements executors.Executor.
func (e *Executor) Launch(ctx context.Context, spec executors.Spec, progress executors.Progress) (executors.Handle, executors.Status, error) {
	if err := spec.Validate(); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	if spec.Image == "" {
		return executors.Handle{}, executors.Status{}, errdefs.RequiredField("image")
	}
	progress.Report("checking image %s", spec.Image)
	if _, err := e.inspectImage(ctx, spec.Image); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}

	dir := filepath.Join(e.opts.StateDir, spec.SessionID)
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	secretFile := filepath.Join(dir, "secret")
	// Readable by root alone: agentctl runs as root in the container, the
	// agent does not.
	if err := os.WriteFile(secretFile, []byte(newSecret()), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return executors.Handle{}, executors.Status{}, err
	}

	// The workspace is the session's for good: made once, kept by a stop,
	// found again by a resume's container.
	workspace, err := e.workspace(spec.SessionID)
	if err != nil {
		_ = os.RemoveAll(dir)
		return executors.Handle{}, executors.Status{}, err
	}

	progress.Report("creating container from %s", spec.Image)
	created, err := e.cli.ContainerCreate(ctx, &container.Config{
		Image:      spec.Image,
		Entrypoint: []string{mountDir + "/agentctl"},
		Cmd: append([]string{"serve", "--listen", "0.0.0.0:" + grpcPort, "--secret-file", mountDir + "/secret",
			"--state-dir", "/tmp/toolscope-agentctl", "--mcp-host", "0.0.0.0", "--mcp-port", mcpPort,
			"--workspaces-dir", containerWorkspaces, "--mirrors-dir", containerMirrors,
			"--agent-uids", agentuid.Single(agentuid.Default.First).String()}, e.opts.AgentctlFlags.Args()...),
		// agentctl is root in the container, whatever the image's USER,
		// so that it can run the agent under another uid.
		User:         "0:0",
		Env:          containerEnv(spec),
		ExposedPorts: nat.PortSet{grpcPort + "/tcp": {}, mcpPort + "/tcp": {}},
		Labels: map[string]string{LabelManaged: "true", LabelOrchestrator: e.opts.OrchestratorID,
			LabelSession: spec.SessionID, LabelTask: spec.TaskID},
	}, &container.HostConfig{
		Binds: []string{e.opts.Agentctl + ":" + mountDir + "/agentctl:ro", secretFile + ":" + mountDir + "/secret:ro",
			workspace + ":" + containerWorkspaces + "/" + spec.SessionID, e.opts.MirrorsDir + ":" + containerMirrors},
		// No setuid binary of the image lifts the agent back to root.
		SecurityOpt: []string{"no-new-privileges:true"},
		PortBindings: nat.PortMap{
			grpcPort + "/tcp": {{HostIP: "127.0.0.1"}},
			mcpPort + "/tcp":  {{HostIP: "127.0.0.1"}},
		},
	}, nil, nil, containerName(spec.SessionID))
	if err != nil {
		_ = os.RemoveAll(dir)
		return executors.Handle{}, executors.Status{}, fmt.Errorf("create container: %w", err)
	}
	st := state{SessionID: spec.SessionID, ContainerID: created.ID, SecretFile: secretFile}
	fail := func(err error) (executors.Handle, executors.Status, error) {
		e.retire(context.WithoutCancel(ctx), st)
		return executors.Handle{}, executors.Status{}, err
	}

	progress.Report("starting container %s", short(created.ID))
	if err := e.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fail(fmt.Errorf("start container: %w", err))
	}
	progress.Report("waiting for agentctl in the container")
	if err := e.waitReady(ctx, created.ID); err != nil {
		return fail(err)
	}
	s, err := e.attach(ctx, st)
	if err != nil {
		return fail(err)
	}
	progress.Report("agentctl ready; %s", spec.Creating())
	status, err := s.Link.CreateSession(ctx, spec)
	if err != nil {
		s.cancel()
		_ = s.Link.Close()
		return fail(fmt.Errorf("create session in agentctl: %w", err))
	}
	if err := s.Link.WaitAttached(ctx); err != nil {
		s.cancel()
		_ = s.Link.Close()
		return fail(fmt.Errorf("attach to agentctl: %w", err))
	}
	status.MCPURL = s.mcpURL
	return executors.Handle{Backend: Name, Version: stateVersion, State: executors.EncodeState(st)}, status, nil
}

// workspace makes (or finds) a session's workspace directory on the host
// and the mirrors directory, and returns the workspace's path.
func (e *Executor) workspace(sessionID string) (string, error) {
	if sessionID == "" || sessionID != filepath.Base(sessionID) || strings.HasPrefix(sessionID, ".") {
		return "", errdefs.InvalidField("session_id", "%q is not a session id", sessionID)
	}
	if err := os.MkdirAll(e.opts.MirrorsDir, 0o700); err != nil {
		return "", fmt.Errorf("the mirrors directory: %w", err)
	}
	if err := os.MkdirAll(e.opts.WorkspacesDir, 0o711); err != nil {
		return "", fmt.Errorf("the workspaces directory: %w", err)
	}
	ws := filepath.Join(e.opts.WorkspacesDir, sessionID)
	if err := os.Mkdir(ws, 0o700); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("the session's workspace: %w", err)
	}
	return ws, nil
}

// RemoveWorkspace implements executors.WorkspaceRemover: the session's
// directory in WorkspacesDir, as the container's agentctl left it, once
// the session's container is gone. dir is the workspace as the container
// saw it.
func (e *Executor) RemoveWorkspace(ctx context.Context, h executors.Handle, dir string) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	if st.SessionID == "" || st.SessionID != filepath.Base(st.SessionID) || strings.HasPrefix(st.SessionID, ".") {
		return errdefs.InvalidField("handle.session_id", "%q is not a session id", st.SessionID)
	}
	if filepath.Clean(dir) != containerWorkspaces+"/"+st.SessionID {
		return errdefs.FailedPrecondition("session %s's workspace %s is not where this executor mounts workspaces (%s): remove it by hand",
			st.SessionID, dir, containerWorkspaces)
	}
	if st.ContainerID != "" {
		if info, err := e.cli.ContainerInspect(ctx, st.ContainerID); err == nil && info.State != nil && info.State.Running {
			return errdefs.FailedPrecondition("session %s runs (container %s): stop it first", st.SessionID, short(st.ContainerID))
		} else if err != nil && !client.IsErrNotFound(err) {
			return fmt.Errorf("inspect container %s: %w", short(st.ContainerID), err)
		}
	}
	return os.RemoveAll(filepath.Join(e.opts.WorkspacesDir, st.SessionID))
}

// waitReady reads agentctl's readiness line from the container's output.
func (e *Executor) waitReady(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.ReadyTimeout)
	defer cancel()
	logs, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return fmt.Errorf("read container output: %w", err)
	}
	defer logs.Close()
	stdout, stdoutW := io.Pipe()
	stderr := &strings.Builder{}
	go func() {
		_, err := stdcopy.StdCopy(stdoutW, &limited{w: stderr, n: 2000}, logs)
		stdoutW.CloseWithError(err)
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err == nil {
		var r struct {
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Addr != "" {
			return nil
		}
		return fmt.Errorf("agentctl printed %q instead of its readiness line; is %s a static agentctl for the image's architecture?",
			strings.TrimSpace(line), e.opts.Agentctl)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("agentctl was not ready within %s: %w", e.opts.ReadyTimeout, errdefs.ErrUnavailable)
	}
	inspect, ierr := e.cli.ContainerInspect(context.WithoutCancel(ctx), id)
	if ierr == nil && !inspect.State.Running {
		return fmt.Errorf("the container exited (code %d) before agentctl was ready: %s; is %s a static agentctl for the image's architecture?",
			inspect.State.ExitCode, strings.TrimSpace(stderr.String()+" "+inspect.State.Error), e.opts.Agentctl)
	}
	return fmt.Errorf("agentctl never announced itself: %v %s", err, strings.TrimSpace(stderr.String()))
}

// attach finds the container's published ports, dials agentctl and
// watches the container for its death.
func (e *Executor) attach(ctx context.Context, st state) (*session, error) {
	inspect, err := e.cli.ContainerInspect(ctx, st.ContainerID)
	if err != nil {
		if client.IsErrNotFound(err) {
			return nil, fmt.Errorf("container %s is gone: %w", short(st.ContainerID), executors.ErrLost)
		}
		return nil, err
	}
	if !inspect.State.Running {
		return nil, fmt.Errorf("container %s is not running (%s): %w", short(st.ContainerID), inspect.State.Status, executors.ErrLost)
	}
	grpcAddr, err := published(inspect, grpcPort)
	if err != nil {
		return nil, err
	}
	mcpAddr, err := published(inspect, mcpPort)
	if err != nil {
		return nil, err
	}
	secret, err := os.ReadFile(st.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("read the agentctl secret file: %w", err)
	}
	link, err := agentlink.Dial(agentlink.Options{
		Addr: grpcAddr, Secret: strings.TrimSpace(string(secret)), Calls: e.opts.Calls, Events: e.opts.Events,
		OrchestratorID: e.opts.OrchestratorID, Log: e.opts.Log,
	})
	if err != nil {
		return nil, err
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	s := &session{Session: attached.NewSession(st.SessionID, link),
		st: st, mcpURL: "http://" + mcpAddr + "/mcp", cancel: cancel}
	go e.watch(watchCtx, s)
	e.sessions.Put(st.ContainerID, s)
	return s, nil
}

// watch waits for the container to stop running.
func (e *Executor) watch(ctx context.Context, s *session) {
	var cause string
	for {
		waitC, errC := e.cli.ContainerWait(ctx, s.st.ContainerID, container.WaitConditionNotRunning)
		var waitErr error
		select {
		case r := <-waitC:
			cause = fmt.Sprintf("container %s exited with code %d", short(s.st.ContainerID), r.StatusCode)
		case waitErr = <-errC:
		case <-ctx.Done():
			return
		}
		if waitErr == nil {
			break
		}
		if ctx.Err() != nil {
			return // released by the orchestrator
		}
		// The wait failed, not the container (the engine restarted, its
		// stream dropped): a container still running is no loss.
		if inspect, err := e.cli.ContainerInspect(ctx, s.st.ContainerID); err == nil && inspect.State != nil && inspect.State.Running {
			e.opts.Log.Warn("watching a session container again after an engine error", "session_id", s.st.SessionID, "error", waitErr)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		cause = fmt.Sprintf("container %s: %v", short(s.st.ContainerID), waitErr)
		break
	}
	s.Exit.End(cause)
	e.sessions.CloseLink(s)
	e.opts.Log.Warn("session container ended", "session_id", s.st.SessionID, "cause", cause)
	if e.sessions.Lost(s.st.ContainerID, s) && e.opts.Events != nil {
		e.opts.Events(executors.SessionEvent{SessionID: s.st.SessionID, Kind: executors.EventLost, Message: cause})
	}
}

func published(inspect container.InspectResponse, port string) (string, error) {
	if inspect.NetworkSettings == nil {
		return "", errors.New("the container has no network settings")
	}
	bindings := inspect.NetworkSettings.Ports[nat.Port(port+"/tcp")]
	for _, b := range bindings {
		if b.HostIP == "127.0.0.1" && b.HostPort != "" {
			return net.JoinHostPort("127.0.0.1", b.HostPort), nil
		}
	}
	return "", fmt.Errorf("port %s of the container is not published on 127.0.0.1", port)
}

func (e *Executor) lookup(h executors.Handle) (*session, state, error) {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return nil, st, err
	}
	s, err := e.sessions.Lookup(st.ContainerID, "container "+short(st.ContainerID), nil)
	return s, st, err
}

// Endpoint implements executors.Executor.
func (e *Executor) Endpoint(h executors.Handle) (executors.Endpoint, error) {
	s, _, err := e.lookup(h)
	if err != nil {
		return executors.Endpoint{}, err
	}
	return e.sessions.Endpoint(s, func(st *executors.Status) { st.MCPURL = s.mcpURL }), nil
}

// AgentctlLog implements executors.AgentctlLogReader: agentctl's output is
// the container's, kept by the engine while the container exists (a
// stopped or lost session's container is removed). It sends the last
// Options.LogTailLines lines, then, with follow, what agentctl writes until the
// container ends.
func (e *Executor) AgentctlLog(ctx context.Context, h executors.Handle, follow bool, fn func([]byte) error) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	logs, err := e.cli.ContainerLogs(ctx, st.ContainerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Tail: strconv.Itoa(e.opts.LogTailLines)})
	if client.IsErrNotFound(err) {
		return errdefs.FailedPrecondition("the container of session %s was removed with it, and agentctl's log with it", st.SessionID)
	} else if err != nil {
		return fmt.Errorf("read the output of container %s: %w", short(st.ContainerID), err)
	}
	defer logs.Close()
	w := writerFunc(func(b []byte) (int, error) { return len(b), fn(b) })
	_, err = stdcopy.StdCopy(w, w, logs)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Stop implements executors.Executor: the session, then its container,
// which is removed.
func (e *Executor) Stop(ctx context.Context, h executors.Handle) error {
	s, st, err := e.lookup(h)
	if errors.Is(err, errdefs.ErrNotFound) {
		if info, err := e.cli.ContainerInspect(ctx, st.ContainerID); err == nil && info.State != nil && info.State.Running && info.Config != nil &&
			info.Config.Labels[LabelOrchestrator] != e.opts.OrchestratorID {
			// A copy of another installation's database (ADR 0014).
			return errdefs.FailedPrecondition("the container of session %s (%s) runs for orchestrator installation %q; stop the session there (docs/operations.md, restoring a backup)",
				st.SessionID, short(st.ContainerID), info.Config.Labels[LabelOrchestrator])
		}
		e.retire(ctx, st) // not attached, but leave no container or secret behind
		return nil
	} else if err != nil {
		return err
	}
	e.sessions.Stop(ctx, s, e.opts.StopGrace, func() {
		s.cancel()
		e.retire(ctx, st)
	})
	return nil
}

// retire removes a session's container, then its directory on the host
// with the launch secret that was bind-mounted into it.
func (e *Executor) retire(ctx context.Context, st state) {
	e.remove(ctx, st.ContainerID)
	if st.SecretFile == "" || filepath.Dir(filepath.Dir(st.SecretFile)) != filepath.Clean(e.opts.StateDir) {
		return // not a directory of this executor's: left alone
	}
	if err := os.RemoveAll(filepath.Dir(st.SecretFile)); err != nil {
		e.opts.Log.Warn("remove a session's directory", "session_id", st.SessionID, "error", err)
	}
}

// remove stops and removes a container; a missing one is fine.
func (e *Executor) remove(ctx context.Context, id string) {
	if id == "" {
		return
	}
	grace := int(e.opts.StopGrace / time.Second)
	if err := e.cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &grace}); err != nil && !client.IsErrNotFound(err) {
		e.opts.Log.Warn("stop container", "container", short(id), "error", err)
	}
	if err := e.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil && !client.IsErrNotFound(err) {
		e.opts.Log.Warn("remove container", "container", short(id), "error", err)
	}
}

// Reattach implements executors.Executor.
func (e *Executor) Reattach(ctx context.Context, h executors.Handle) error {
	s, st, err := e.lookup(h)
	if err == nil && !s.Exit.Gone() {
		return nil
	}
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	s, err = e.attach(ctx, st)
	if err != nil {
		return err
	}
	// This container was started for this session: the link may carry it.
	if err := attached.Adopt(ctx, s.Link, st.SessionID, "agentctl in container "+short(st.ContainerID)); err != nil {
		e.release(s)
		return err
	}
	return nil
}

func (e *Executor) release(s *session) {
	s.cancel()
	e.sessions.Release(s.st.ContainerID, s)
}

// Managed lists the containers this orchestrator created that still exist,
// by session id: what a restarted orchestrator can re-attach or clean.
func (e *Executor) Managed(ctx context.Context) (map[string]string, error) {
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelOrchestrator+"="+e.opts.OrchestratorID))})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range list {
		out[c.Labels[LabelSession]] = c.ID
	}
	return out, nil
}

// Sweep implements executors.Sweeper: it removes the managed containers
// of sessions keep does not want.
func (e *Executor) Sweep(ctx context.Context, keep func(sessionID string) bool) ([]string, error) {
	list, err := e.Managed(ctx)
	if err != nil {
		return nil, err
	}
	var cleaned []string
	for session, id := range list {
		if keep(session) {
			continue
		}
		e.retire(ctx, state{SessionID: session, ContainerID: id, SecretFile: filepath.Join(e.opts.StateDir, session, "secret")})
		cleaned = append(cleaned, session)
	}
	return cleaned, nil
}

// Close implements executors.Executor: containers keep running.
func (e *Executor) Close() error {
	for _, s := range e.sessions.Drain() {
		s.cancel()
	}
	return nil
}

// Kill ends a session's container abruptly (SIGKILL), as a crash would.
// Tests use it; it is not part of the Executor interface.
func (e *Executor) Kill(ctx context.Context, h executors.Handle) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	return e.cli.ContainerKill(ctx, st.ContainerID, "SIGKILL")
}

// containerEnv is what of the orchestrator's environment the container
// gets: agentctl's names (the agent's allowlist and the tracing
// variables), except the base variables (PATH, HOME, ...), which are the
// image's.
func containerEnv(spec executors.Spec) []string {
	names := slices.DeleteFunc(spec.AgentctlNames(), func(n string) bool { return slices.Contains(profiles.BaseEnv, n) })
	return profiles.Filter(os.Environ(), names)
}

func containerName(sessionID string) string {
	return "toolscope-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, sessionID) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// limited keeps the first n bytes written to it.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
