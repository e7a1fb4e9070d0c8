package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// runsImages says whether an executor runs a session in an image.
func runsImages(executor string) bool { return executor == "docker" || executor == "kubernetes" }

// Executors are the backend names a session can be launched with.
var Executors = []string{"local", "docker", "remote", "kubernetes"}

// SessionInput is a request to launch a session.
type SessionInput struct {
	TaskID       string
	Executor     string
	Mode         model.Mode // "" means model.ModeTask
	AgentArgv    []string
	AgentWorkDir string
	// AgentProfile ("claude-code", "codex", "command"), AgentModel,
	// AgentCredentialEnv (a variable name) and AgentAuth select an agent
	// profile.
	AgentProfile, AgentModel, AgentCredentialEnv, AgentAuth string
	// ModelUnchecked passes AgentModel even if its profile does not know
	// it (profiles.CheckModel); it is a launch's choice, not stored.
	ModelUnchecked bool
	// AgentPassEnv names more variables of the executor's environment the
	// agent gets (--env NAME): names, never values.
	AgentPassEnv []string
	Image        string // docker and kubernetes only
}

// profileSpec is the launch as package profiles sees it.
func (in SessionInput) profileSpec(profile string) profiles.Spec {
	return profiles.Spec{Profile: profile, Args: in.AgentArgv, Model: in.AgentModel, CredentialEnv: in.AgentCredentialEnv, PassEnv: in.AgentPassEnv,
		Auth: in.AgentAuth}
}

// LaunchPlan is what a launch would start (profiles.Plan) and, if it
// would be refused before anything is recorded, why.
type LaunchPlan struct {
	profiles.Plan
	// Refused is the executor's preflight refusal (or the executor's
	// absence), "" when the launch would pass it.
	Refused string
}

// DryRun returns what launching in would start, through the same profile
// rendering agentctl runs, with placeholders for the session's endpoint,
// and what the executor's preflight would refuse; nothing is recorded or
// started. Its PassEnv is the whole allowlist of the executor's
// environment (profiles.Allowed), which the executor and agentctl apply.
func (s *Service) DryRun(ctx context.Context, in SessionInput) (LaunchPlan, error) {
	in, err := s.validateLaunch(ctx, in)
	if err != nil {
		return LaunchPlan{}, err
	}
	plan, err := s.plan(in)
	if err != nil {
		return LaunchPlan{}, err
	}
	out := LaunchPlan{Plan: plan}
	exec, err := s.executor(in.Executor)
	if err == nil {
		err = preflight(ctx, exec, in.preflightSpec(), "launch", "no session would be kept")
	}
	if err != nil {
		out.Refused = err.Error()
	}
	return out, nil
}

// plan renders what launching in would start.
func (s *Service) plan(in SessionInput) (profiles.Plan, error) {
	profile := in.AgentProfile
	if profile == "" {
		if len(in.AgentArgv) == 0 {
			return profiles.Plan{Env: map[string]string{}, PassEnv: profiles.Allowed(in.profileSpec("")), Files: []profiles.File{}}, nil
		}
		profile = profiles.Command
	}
	dir := "<session dir>"
	return profiles.Render(in.profileSpec(profile),
		profiles.Endpoint{URL: "http://127.0.0.1:<port>/mcp", Token: "<session token>", Bridge: dir + "/bridge.json",
			Agentctl: "<agentctl>", Dir: dir})
}

// ErrNoExecutor reports a launch or resume through an executor backend
// this orchestrator is not configured to drive.
var ErrNoExecutor = fmt.Errorf("executor backend not available: %w", errdefs.ErrUnavailable)

func (s *Service) executor(name string) (executors.Executor, error) {
	if e, ok := s.execs[name]; ok {
		return e, nil
	}
	var have []string
	for n := range s.execs {
		have = append(have, n)
	}
	slices.Sort(have)
	if len(have) == 0 {
		have = []string{"none"}
	}
	return nil, fmt.Errorf("executor %q (this orchestrator runs: %s): %w", name, strings.Join(have, ", "), ErrNoExecutor)
}

// LaunchSession records a session and launches it through its executor
// with the task's current provider set. progress, if set, receives a line
// per step. A failed launch leaves no session: the record, pending while
// the launch ran, is deleted and the task's events keep the attempt and
// its cause (ADR 0015).
func (s *Service) LaunchSession(ctx context.Context, in SessionInput, progress executors.Progress) (model.Session, error) {
	in, err := s.validateLaunch(ctx, in)
	if err != nil {
		return model.Session{}, err
	}
	task, err := s.store.GetTask(ctx, in.TaskID)
	if err != nil {
		return model.Session{}, err
	}
	exec, err := s.executor(in.Executor)
	if err != nil {
		return model.Session{}, err
	}
	if err := preflight(ctx, exec, in.preflightSpec(), "launch", "no session kept"); err != nil {
		return model.Session{}, err
	}
	if !s.leaseHeld() {
		return model.Session{}, fmt.Errorf("this replica (%s) could not renew its lease within %s; launch through another replica: %w",
			s.replica.id, s.replica.ttl, errdefs.ErrUnavailable)
	}
	sess, err := s.store.CreateSession(ctx, model.Session{
		TaskID: task.ID, Executor: in.Executor, Mode: in.Mode, State: model.SessionPending, Owner: s.replica.id,
		AgentArgv: in.AgentArgv, AgentWorkDir: in.AgentWorkDir, Image: strings.TrimSpace(in.Image),
		AgentProfile: in.AgentProfile, AgentModel: in.AgentModel, AgentCredentialEnv: in.AgentCredentialEnv,
		AgentPassEnv: in.AgentPassEnv, AgentAuth: in.AgentAuth,
	})
	if err != nil {
		return model.Session{}, err
	}
	progress.Report("recorded session %s on task %s (providers %s, generation %d)", sess.ID, task.ID,
		describeSet(task.Providers), task.Providers.Generation)
	running, _, err := s.start(ctx, exec, sess, progress, verbLaunched)
	return running, err
}

// preflight asks the executor, before a session is recorded (or started
// again), whether it can start there (executors.Preflighter: the agent
// binary, the credential variable the user named, the image, the remote
// daemon). The refusal says what was refused (verb) and what is kept,
// and names what the user typed.
func preflight(ctx context.Context, exec executors.Executor, spec executors.Spec, verb, kept string) error {
	p, ok := exec.(executors.Preflighter)
	if !ok {
		return nil
	}
	if err := p.Preflight(ctx, spec); err != nil {
		return fmt.Errorf("%s refused on the %s executor, %s: %w", verb, exec.Name(), kept, err)
	}
	return nil
}

// preflightSpec is what a launch of in would start, for preflight.
func (in SessionInput) preflightSpec() executors.Spec {
	spec := executors.Spec{TaskID: in.TaskID, Mode: in.Mode, Image: strings.TrimSpace(in.Image)}
	if len(in.AgentArgv) > 0 || in.AgentProfile != "" {
		spec.Agent = &executors.AgentCommand{Argv: in.AgentArgv, WorkDir: in.AgentWorkDir, Profile: in.AgentProfile,
			Model: in.AgentModel, CredentialEnv: in.AgentCredentialEnv, PassEnv: in.AgentPassEnv, Auth: in.AgentAuth}
	}
	return spec
}

// validateLaunch checks a launch request and applies its defaults.
func (s *Service) validateLaunch(ctx context.Context, in SessionInput) (SessionInput, error) {
	if err := required("task_id", in.TaskID); err != nil {
		return in, err
	}
	if err := checkExecutor(in.Executor); err != nil {
		return in, err
	}
	switch in.Mode {
	case "":
		in.Mode = model.ModeTask
	case model.ModeTask, model.ModePlan:
	default:
		return in, errdefs.InvalidField("mode", "%q is not a session mode; use task or plan", in.Mode)
	}
	total := 0
	for i, a := range in.AgentArgv {
		if err := textlimit.Text.Check(fmt.Sprintf("agent.argv[%d]", i), a); err != nil {
			return in, err
		}
		total += len(a)
	}
	if err := textlimit.Text.CheckBytes("agent.argv", total, "in all"); err != nil {
		return in, err
	}
	for _, f := range []struct {
		kind         textlimit.Kind
		field, value string
	}{
		{textlimit.Path, "agent.working_dir", in.AgentWorkDir},
		{textlimit.Path, "image", in.Image},
		{textlimit.Title, "agent.model", in.AgentModel},
	} {
		if err := f.kind.Check(f.field, f.value); err != nil {
			return in, err
		}
	}
	// Names: their characters are checked below (profiles); their bytes here.
	if err := textlimit.Title.CheckBytes("agent.credential_env", len(in.AgentCredentialEnv), ""); err != nil {
		return in, err
	}
	for i, name := range in.AgentPassEnv {
		if err := textlimit.Title.CheckBytes(fmt.Sprintf("agent.pass_env[%d]", i), len(name), ""); err != nil {
			return in, err
		}
	}
	switch {
	case runsImages(in.Executor) && strings.TrimSpace(in.Image) == "":
		return in, errdefs.InvalidField("image", "is required for the %s executor", in.Executor)
	case !runsImages(in.Executor) && in.Image != "":
		return in, errdefs.InvalidField("image", "only the docker and kubernetes executors run images")
	}
	if len(in.AgentPassEnv) > profiles.MaxPassEnv {
		return in, errdefs.InvalidField("agent.pass_env", "at most %d names, not %d", profiles.MaxPassEnv, len(in.AgentPassEnv))
	}
	for i, name := range in.AgentPassEnv {
		field := fmt.Sprintf("agent.pass_env[%d]", i)
		if looksLikeToken(name) {
			return in, errdefs.InvalidField(field, "looks like a token, not a variable name; give the NAME of the variable that holds it")
		}
		if err := profiles.ValidateEnvName(name); err != nil {
			return in, errdefs.InvalidField(field, "%v", err)
		}
	}
	if in.AgentProfile != "" || in.AgentAuth != "" {
		if err := in.profileSpec(in.AgentProfile).Validate(); err != nil {
			return in, errdefs.InvalidField("agent.profile", "%v", err)
		}
		if !in.ModelUnchecked {
			if err := profiles.CheckModel(in.AgentProfile, in.AgentModel); err != nil {
				return in, errdefs.InvalidField("agent.model", "%v", err)
			}
		}
	}
	if err := s.checkAgentEnv(ctx, in); err != nil {
		return in, err
	}
	if _, err := s.store.TaskProviders(ctx, in.TaskID); err != nil {
		return in, err
	}
	return in, nil
}

// verbLaunched is start's verb for a first launch; a resume is another.
const verbLaunched = "launched"

// abandon forgets a first launch that failed before its session started
// (nothing runs: a failed Launch leaves nothing behind), even if the caller
// went away, and returns cause, saying so. The task's events keep it.
func (s *Service) abandon(ctx context.Context, id string, cause error) error {
	err := s.store.AbandonSession(context.WithoutCancel(ctx), id, model.Event{Kind: model.EventSessionEnded,
		Message: "launch failed, no session kept: " + cause.Error()})
	if err != nil {
		s.log.ErrorContext(ctx, "forget a launch that never started", "session_id", id, "error", err)
	}
	return fmt.Errorf("launch failed, no session kept: %w", cause)
}

// start launches sess through exec with the task's current provider set
// and records the outcome. It returns the status the backend launched the
// session with (a hosted session's token is in it, once).
func (s *Service) start(ctx context.Context, exec executors.Executor, sess model.Session, progress executors.Progress, verb string) (model.Session, executors.Status, error) {
	var none executors.Status
	task, err := s.store.GetTask(ctx, sess.TaskID)
	if err != nil && verb == verbLaunched {
		return model.Session{}, none, s.abandon(ctx, sess.ID, err)
	} else if err != nil {
		return sess, none, err
	}
	spec := executors.Spec{
		SessionID: sess.ID, TaskID: task.ID, WorkspaceID: task.WorkspaceID, Mode: sess.Mode,
		Providers: task.Providers.Set, Generation: task.Providers.Generation, Image: sess.Image,
	}
	if spec.External, spec.ExternalGeneration, err = s.externalTools(ctx, task.WorkspaceID); err != nil && verb == verbLaunched {
		return model.Session{}, none, s.abandon(ctx, sess.ID, err)
	} else if err != nil {
		return sess, none, err
	}
	spec.Orientation = s.orientation(ctx, sess.ID)
	var repos map[string]string
	if spec.Checkouts, repos, err = s.checkouts(ctx, task, sess.ID); err != nil && verb == verbLaunched {
		return model.Session{}, none, s.abandon(ctx, sess.ID, err)
	} else if err != nil {
		return sess, none, err
	}
	if len(sess.AgentArgv) > 0 || sess.AgentProfile != "" {
		spec.Agent = &executors.AgentCommand{Argv: sess.AgentArgv, WorkDir: sess.AgentWorkDir,
			Profile: sess.AgentProfile, Model: sess.AgentModel, CredentialEnv: sess.AgentCredentialEnv, PassEnv: sess.AgentPassEnv, Auth: sess.AgentAuth}
	}
	handle, status, launchErr := exec.Launch(ctx, spec, progress)
	if launchErr != nil && verb == verbLaunched {
		return model.Session{}, none, s.abandon(ctx, sess.ID, launchErr)
	}
	if launchErr != nil {
		// Record the failure even if the caller went away.
		failed, err := s.store.UpdateSession(context.WithoutCancel(ctx), sess.ID, func(m *model.Session) ([]model.Event, error) {
			m.State, m.StatusMessage = model.SessionFailed, launchErr.Error()
			return []model.Event{{Kind: model.EventSessionEnded, Message: verb + " failed: " + launchErr.Error()}}, nil
		})
		if err != nil {
			s.log.ErrorContext(ctx, "record a failed launch", "session_id", sess.ID, "error", err)
			return sess, none, launchErr
		}
		return failed, none, fmt.Errorf("session %s: %w", failed.ID, launchErr)
	}
	if w := describeWorkspace(status); w != "" {
		progress.Report("%s", strings.TrimPrefix(w, "; "))
	}
	progress.Report("agentctl applied providers %s at generation %d; %d tools", describeSet(model.ProviderSet{Set: status.Providers}),
		status.Generation, len(status.ToolNames))
	running, err := s.store.UpdateSession(context.WithoutCancel(ctx), sess.ID, func(m *model.Session) ([]model.Event, error) {
		if m.State == model.SessionPending && m.AgentExited {
			m.StatusMessage = agentExitedMessage(m.AgentExitCode) // the agent exited during the launch
		} else {
			m.StatusMessage, m.AgentExited, m.AgentExitCode = "", false, 0 // a new run
		}
		m.State, m.Handle, m.NeedsRepair = model.SessionRunning, model.Handle{Version: handle.Version, State: handle.State}, false
		m.Applied = model.ProviderSet{Set: status.Providers, Generation: status.Generation}
		m.ExternalGeneration = status.ExternalGeneration
		m.Checkouts = recordCheckouts(m.Checkouts, status, repos)
		return []model.Event{
			{Kind: model.EventSessionStarted, Message: fmt.Sprintf("%s on %s%s", verb, exec.Name(), describeWorkspace(status))},
			{Kind: model.EventProvidersPushed, Providers: m.Applied, Message: "applied at " + verb},
		}, nil
	})
	if err != nil {
		return running, none, err
	}
	// An agentctl that died while the launch finished sent its loss event
	// before the session was running, when it was ignored: look once more.
	running = s.refresh(context.WithoutCancel(ctx), running)
	// A batch or a catalog change committed while this session was
	// starting did not reach it (it was not running yet): the reconciler
	// brings it up to date before the launch returns.
	s.reconcileAndWait(context.WithoutCancel(ctx), []model.Session{running})
	if updated, err := s.store.GetSession(context.WithoutCancel(ctx), running.ID); err == nil {
		running = updated
	}
	return running, status, nil
}

// ResumeSession brings a session back to its desired surface: a running
// session is reconciled at once (repairing a failed push); a stopped,
// failed or lost one is launched again with it.
func (s *Service) ResumeSession(ctx context.Context, id string) (model.Session, error) {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	exec, err := s.executor(sess.Executor)
	if err != nil {
		return sess, err
	}
	if sess, err = s.act(ctx, sess); err != nil {
		return sess, err
	}
	if sess.State == model.SessionRunning {
		return s.repair(ctx, exec, sess)
	}
	return s.relaunch(ctx, exec, sess)
}

// relaunch starts a session again after ending what is left of its last
// run: a failed session's agentctl may still run (frozen for a while, or
// unreachable), and one session never has two agentctls.
func (s *Service) relaunch(ctx context.Context, exec executors.Executor, sess model.Session) (model.Session, error) {
	if sess.Executor == model.ExecutorHosted {
		// Its token was shown once, at attach: a new run would need a new
		// one, which only an attach shows.
		return sess, errdefs.FailedPrecondition("session %q is a hosted session that %s; hosted sessions are not resumed: "+
			"attach a new one (toolscope session attach %s)", sess.ID, sess.State, sess.TaskID)
	}
	in := SessionInput{TaskID: sess.TaskID, Mode: sess.Mode, Image: sess.Image, AgentArgv: sess.AgentArgv, AgentWorkDir: sess.AgentWorkDir,
		AgentProfile: sess.AgentProfile, AgentModel: sess.AgentModel, AgentCredentialEnv: sess.AgentCredentialEnv,
		AgentPassEnv: sess.AgentPassEnv, AgentAuth: sess.AgentAuth}
	if err := s.checkAgentEnv(ctx, in); err != nil {
		// A name stored at launch may since have become a credential's.
		return sess, fmt.Errorf("resume refused, session %s left as it was: %w", sess.ID, err)
	}
	if err := preflight(ctx, exec, in.preflightSpec(), "resume", "session "+sess.ID+" left as it was"); err != nil {
		return sess, err
	}
	if len(sess.Handle.State) > 0 {
		if err := exec.Stop(ctx, handleOf(sess)); err != nil {
			return sess, fmt.Errorf("end the last agentctl of session %s before resuming it: %w", sess.ID, err)
		}
	}
	running, _, err := s.start(ctx, exec, sess, nil, "resumed")
	return running, err
}

// repair reconciles a running session now (a wake skips the
// reconciler's backoff) and waits for the outcome; a session whose
// agentctl is gone, or that ended meanwhile, is launched again.
func (s *Service) repair(ctx context.Context, exec executors.Executor, sess model.Session) (model.Session, error) {
	p := s.reconcileAndWait(ctx, []model.Session{sess})[0]
	if errors.Is(p.Err, executors.ErrLost) || errors.Is(p.Err, errdefs.ErrNotFound) {
		return s.relaunch(ctx, exec, sess)
	}
	now, err := s.store.GetSession(ctx, sess.ID)
	if err != nil {
		return sess, err
	}
	if now.State != model.SessionRunning {
		return s.relaunch(ctx, exec, now)
	}
	return now, p.Err
}

// StopSession stops a session: its executor ends every process of it. A
// failed session is stopped too (its agentctl may still run: frozen, or
// unreachable for a while) and recorded stopped. Stopping a stopped
// session succeeds and changes nothing.
func (s *Service) StopSession(ctx context.Context, id string, discard bool) (model.Session, error) {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	if sess.State == model.SessionStopped {
		return sess, nil
	}
	if sess, err = s.act(ctx, sess); err != nil {
		return sess, err
	}
	drops := s.dropsWorkspace(sess)
	if drops && !discard {
		if err := s.workDelivered(ctx, sess); err != nil {
			return sess, err
		}
	}
	// The agent ends first, and the work its checkouts hold is measured
	// then (a session whose agentctl is gone keeps what was measured last).
	var last *executors.Status
	if s.inspectable(sess) {
		if st, err := s.ctl.StopSession(ctx, handleOf(sess)); err == nil {
			last = &st
		} else {
			s.log.Warn("ending a session's agent before its stop", "session_id", id, "error", err)
		}
	}
	if sess.State == model.SessionRunning || (sess.State == model.SessionFailed && len(sess.Handle.State) > 0) {
		exec, err := s.executor(sess.Executor)
		if err != nil {
			if sess.State == model.SessionRunning {
				return sess, err
			}
			// A failed session whose backend is off here: nothing of it
			// can be reached; it is recorded stopped.
		} else if err := exec.Stop(ctx, handleOf(sess)); err != nil {
			return sess, fmt.Errorf("stop session %s: %w", id, err)
		}
	}
	stopped, err := s.store.UpdateSession(ctx, id, func(m *model.Session) ([]model.Event, error) {
		switch m.State {
		case model.SessionStopped:
			return nil, errStateChanged
		case model.SessionFailed:
			// Its first session.ended said how it failed; this one says
			// that nothing of it runs any more.
			m.State = model.SessionStopped
			return []model.Event{{Kind: model.EventSessionEnded, Message: "stopped after it failed"}}, nil
		}
		m.State = model.SessionStopped
		if last != nil {
			m.Checkouts = withWork(m.Checkouts, *last, time.Now().UTC())
		}
		if drops {
			m.Checkouts.Removed = time.Now().UTC()
			if lost := m.Checkouts.Undelivered(); lost != "" {
				return []model.Event{{Kind: model.EventSessionEnded, Message: "stopped; its workspace ended with it, discarding " + lost}}, nil
			}
		}
		return []model.Event{{Kind: model.EventSessionEnded, Message: "stopped"}}, nil
	})
	if errors.Is(err, errStateChanged) {
		return s.GetSession(ctx, id)
	}
	if err == nil {
		s.PruneLogs(ctx)
	}
	return stopped, err
}

var errStateChanged = errors.New("session state changed")

// dropsWorkspace reports whether stopping sess ends its workspace: its
// executor's stop does (executors.WorkspaceDropper) and it has one.
func (s *Service) dropsWorkspace(sess model.Session) bool {
	exec, err := s.executor(sess.Executor)
	if err != nil || sess.Checkouts.Dir == "" || !sess.Checkouts.Removed.IsZero() {
		return false
	}
	d, ok := exec.(executors.WorkspaceDropper)
	return ok && d.DropsWorkspaces()
}

// workDelivered refuses to stop a session whose stop ends its workspace
// while a checkout holds work its provider lacks, measured now; a
// session whose agentctl is gone has nothing left to lose.
func (s *Service) workDelivered(ctx context.Context, sess model.Session) error {
	if !s.inspectable(sess) {
		return nil
	}
	st, err := s.ctl.Work(ctx, handleOf(sess))
	switch {
	case errors.Is(err, executors.ErrLost):
		return nil
	case err != nil:
		return fmt.Errorf("measure session %s's work before its workspace ends with it: %w (stop it anyway with --discard)", sess.ID, err)
	}
	if lost := withWork(sess.Checkouts, st, time.Now().UTC()).Undelivered(); lost != "" {
		return errdefs.FailedPrecondition("session %q's workspace ends with it on the %s executor, and holds work its provider lacks: %s; "+
			"deliver it first (the agent's git_push), or stop it anyway with --discard", sess.ID, sess.Executor, lost)
	}
	return nil
}

// GetSession returns one session, with its state refreshed from its
// executor: a running session whose agentctl is gone is recorded failed.
func (s *Service) GetSession(ctx context.Context, id string) (model.Session, error) {
	if err := required("session_id", id); err != nil {
		return model.Session{}, err
	}
	sess, err := s.store.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	return s.refresh(ctx, sess), nil
}

// CleanSession removes a stopped session's workspace through its
// executor (executors.WorkspaceRemover). It is refused while a checkout
// may hold work its provider lacks, as the stop measured it (uncommitted
// paths, unpushed commits, or a measure that failed or never ran), unless
// discard. Cleaning a cleaned session succeeds and changes nothing; a
// resume makes a new workspace.
func (s *Service) CleanSession(ctx context.Context, id string, discard bool) (model.Session, error) {
	sess, err := s.GetSession(ctx, id)
	switch {
	case err != nil:
		return sess, err
	case !sess.Checkouts.Removed.IsZero():
		return sess, nil
	case sess.State != model.SessionStopped:
		return sess, errdefs.FailedPrecondition("session %q is %s: its workspace is removed only once it is stopped (toolscope session stop %s)", id, sess.State, id)
	case sess.Checkouts.Dir == "":
		return sess, errdefs.FailedPrecondition("session %q has no workspace", id)
	}
	if lost := sess.Checkouts.Undelivered(); lost != "" && !discard {
		return sess, errdefs.FailedPrecondition("session %q's workspace may hold work its provider lacks: %s; deliver it first "+
			"(toolscope session resume %s, and the agent's git_push), or remove it anyway with --discard", id, lost, id)
	}
	if sess, err = s.act(ctx, sess); err != nil {
		return sess, err
	}
	exec, err := s.executor(sess.Executor)
	if err != nil {
		return sess, err
	}
	rm, ok := exec.(executors.WorkspaceRemover)
	if !ok {
		return sess, errdefs.FailedPrecondition("the %s executor does not remove workspaces: session %q's is %s on its agentctl's host", sess.Executor, id, sess.Checkouts.Dir)
	}
	if err := rm.RemoveWorkspace(ctx, handleOf(sess), sess.Checkouts.Dir); err != nil {
		return sess, fmt.Errorf("remove the workspace of session %s: %w", id, err)
	}
	s.log.Info("session workspace removed", "session_id", id, "dir", sess.Checkouts.Dir, "discarded", sess.Checkouts.Undelivered())
	cleaned, err := s.store.UpdateSession(ctx, id, func(m *model.Session) ([]model.Event, error) {
		m.Checkouts.Removed = time.Now().UTC()
		return nil, nil
	})
	if err != nil {
		return sess, err
	}
	return cleaned, nil
}

// MeasureSession is GetSession with the work of a running session's
// checkouts measured now (Controller.Work), for whoever looks at one
// session: not recorded (a stop records the last), and left as recorded
// when the session has no checkout or its agentctl cannot measure.
func (s *Service) MeasureSession(ctx context.Context, id string) (model.Session, error) {
	sess, err := s.GetSession(ctx, id)
	if err != nil || !s.inspectable(sess) || len(sess.Checkouts.Repositories) == 0 {
		return sess, err
	}
	st, err := s.ctl.Work(ctx, handleOf(sess))
	if err != nil {
		s.log.Warn("measuring a session's work", "session_id", id, "error", err)
		return sess, nil
	}
	sess.Checkouts = withWork(sess.Checkouts, st, time.Now().UTC())
	return sess, nil
}

// ListSessions returns a task's sessions (model.Every: every task's),
// refreshed like GetSession. The running ones are inspected at most
// Options.MaxInspects at a time: an agentctl that does not answer holds a
// listing up to its probe timeout, and a host with many sessions that
// went down must not hold it once per session.
func (s *Service) ListSessions(ctx context.Context, taskID string) ([]model.Session, error) {
	return s.ListSessionsPage(ctx, taskID, store.Page{})
}

// ListSessionsPage returns the page p of ListSessions: only the page's
// sessions are refreshed.
func (s *Service) ListSessionsPage(ctx context.Context, taskID string, p store.Page) ([]model.Session, error) {
	if err := required("task_id", taskID); err != nil {
		return nil, err
	}
	list, err := s.store.ListSessionsPage(ctx, taskID, p)
	slots := make(chan struct{}, s.maxInspects)
	var wg sync.WaitGroup
	for i := range list {
		if !s.inspectable(list[i]) {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			list[i] = s.refresh(ctx, list[i])
		})
	}
	wg.Wait()
	return list, err
}

// inspectable says whether refresh asks sess's executor about it: a
// running session of this replica, on an executor it has.
func (s *Service) inspectable(sess model.Session) bool {
	if sess.State != model.SessionRunning || !s.owns(sess) {
		return false // another replica's session is as its owner recorded it
	}
	_, ok := s.execs[sess.Executor]
	return ok
}

// refresh asks a running session's executor whether it is still there.
func (s *Service) refresh(ctx context.Context, sess model.Session) model.Session {
	if !s.inspectable(sess) {
		return sess
	}
	st, err := s.ctl.Inspect(ctx, handleOf(sess))
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		// Not attached to this orchestrator: re-attach at startup failed.
		st = executors.Status{Phase: executors.PhaseLost, Reason: err.Error()}
	case err != nil:
		return sess
	}
	if st.Phase == executors.PhaseAgentExited && !sess.AgentExited {
		// agentctl's event was missed (no orchestrator was attached) or is
		// still on its way: record the exit now.
		s.recordAgentExit(ctx, sess.ID, st.AgentExitCode, st.AgentOutput)
		if updated, err := s.store.GetSession(ctx, sess.ID); err == nil {
			sess = updated
		}
	}
	if st.Phase != executors.PhaseLost && st.Phase != executors.PhaseStopped {
		return sess
	}
	return s.markLost(ctx, sess, st.Reason)
}

// markLost records a session whose agentctl is gone as failed and in need
// of repair.
func (s *Service) markLost(ctx context.Context, sess model.Session, reason string) model.Session {
	if reason == "" {
		reason = "agentctl is gone"
	}
	updated, err := s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
		if m.State != model.SessionRunning && m.State != model.SessionPending {
			return nil, errStateChanged
		}
		m.State, m.NeedsRepair, m.StatusMessage = model.SessionFailed, true, "lost: "+reason
		return []model.Event{{Kind: model.EventSessionEnded, Message: "lost: " + reason}}, nil
	})
	if err != nil {
		return sess
	}
	return updated
}

// SessionEvent takes what a backend reports about a session on its own.
// A lost session (its agentctl died) is recorded failed and in need of
// repair at once, with a session_ended event, so watchers learn it without
// anyone asking; ResumeSession relaunches it with the task's current set.
func (s *Service) SessionEvent(ev executors.SessionEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch ev.Kind {
	case executors.EventAgentExited:
		s.recordAgentExit(ctx, ev.SessionID, ev.AgentExitCode, ev.AgentOutput)
		return
	case executors.EventLost:
	default:
		return
	}
	sess, err := s.store.GetSession(ctx, ev.SessionID)
	if err != nil || sess.State != model.SessionRunning {
		return // unknown, or launching (the launch records its own outcome), or ended
	}
	s.log.WarnContext(ctx, "session lost", "session_id", sess.ID, "task_id", sess.TaskID, "reason", ev.Message)
	s.markLost(ctx, sess, ev.Message)
}

// recordAgentExit records that a session's agent exited, once, however it
// is learnt (agentctl's event, or an inspection that finds the agent gone):
// the exit code on the session, its status message (never the output),
// and an agent.exited event with the code and the last lines of the
// agent's output (the store scrubs event messages; WatchTaskEvents shows
// the output only to a caller who may read the session's log, see
// withoutAgentOutput). The session stays running: its agentctl serves the
// session's MCP endpoint, with the task's tools, until the session is
// stopped (ADR 0015). A session still launching records it too, and its
// launch keeps it.
func (s *Service) recordAgentExit(ctx context.Context, sessionID string, code int, output string) {
	_, err := s.store.UpdateSession(ctx, sessionID, func(m *model.Session) ([]model.Event, error) {
		if (m.State != model.SessionRunning && m.State != model.SessionPending) || m.AgentExited {
			return nil, errStateChanged
		}
		m.AgentExited, m.AgentExitCode = true, code
		m.StatusMessage = agentExitedMessage(code)
		msg := fmt.Sprintf("agent exited with code %d", code)
		if output = strings.TrimSpace(output); output != "" {
			msg += agentOutputMark + output
		} else {
			msg += "; no output"
		}
		return []model.Event{{Kind: model.EventAgentExited, Message: msg}}, nil
	})
	if err == nil {
		s.log.InfoContext(ctx, "agent exited", "session_id", sessionID, "exit_code", code)
	}
}

// agentOutputMark separates, in an agent.exited event's message, the exit
// ("agent exited with code N") from the agent's output after it.
const agentOutputMark = "; last output:\n"

// withoutAgentOutput returns e as a caller who may not read an agent's
// output (whose role is below need: Options.AgentOutputRole) reads it: an agent.exited event says
// that the agent exited and its code, and where its output is; the
// output is dropped, and so is anything else after the exit's first
// clause, so an event recorded in any form (an older release's too)
// keeps nothing of it. Other events are as recorded.
func withoutAgentOutput(e model.Event, need model.Role) model.Event {
	if e.Kind != model.EventAgentExited {
		return e
	}
	exit, _, _ := strings.Cut(e.Message, ";")
	exit, _, _ = strings.Cut(exit, "\n")
	e.Message = fmt.Sprintf("%s; its output is withheld: reading it (toolscope session logs) needs role %s",
		strings.TrimSpace(exit), need)
	return e
}

// agentExitedMessage is the status message of a running session whose
// agent exited.
func agentExitedMessage(code int) string {
	return fmt.Sprintf("agent exited with code %d; the session serves MCP until it is stopped", code)
}

// sweep lets backends that can (executors.Sweeper) remove what belongs to
// no running session, such as containers of sessions that ended while the
// orchestrator was down.
func (s *Service) sweep(ctx context.Context) {
	active, err := s.store.ActiveSessions(ctx)
	if err != nil {
		return
	}
	running := map[string]bool{}
	for _, sess := range active {
		running[sess.ID] = true
	}
	for name, exec := range s.execs {
		sw, ok := exec.(executors.Sweeper)
		if !ok {
			continue
		}
		cleaned, err := sw.Sweep(ctx, func(id string) bool { return running[id] })
		if err != nil {
			s.log.WarnContext(ctx, "sweep", "executor", name, "error", err)
			continue
		}
		if len(cleaned) > 0 {
			s.log.InfoContext(ctx, "removed what no running session needs", "executor", name, "sessions", cleaned)
		}
	}
}

func handleOf(sess model.Session) executors.Handle {
	return executors.Handle{Backend: sess.Executor, Version: sess.Handle.Version, State: sess.Handle.State}
}

func describeSet(p model.ProviderSet) string {
	if p.Set.IsEmpty() {
		return "none"
	}
	return p.Set.String()
}

func checkExecutor(name string) error {
	if err := required("executor", name); err != nil {
		return err
	}
	if slices.Contains(Executors, name) {
		return nil
	}
	if name == model.ExecutorHosted {
		return errdefs.InvalidField("executor", "a hosted session runs no agent and is not launched: open one with `toolscope session attach TASK`")
	}
	return errdefs.InvalidField("executor", "%q is not an executor; use one of %s", name, strings.Join(Executors, ", "))
}

// SessionMCP is how to attach an MCP client to a running session.
type SessionMCP struct {
	URL, BearerToken string
	StdioCommand     []string
}

// GetSessionMCP asks a running session's executor for its MCP endpoint.
func (s *Service) GetSessionMCP(ctx context.Context, id string) (SessionMCP, error) {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return SessionMCP{}, err
	}
	if sess.State != model.SessionRunning {
		return SessionMCP{}, errdefs.FailedPrecondition("session %q is %s; resume it first", id, sess.State)
	}
	if !s.owns(sess) {
		return SessionMCP{}, s.notOwned(sess)
	}
	if _, err := s.executor(sess.Executor); err != nil {
		return SessionMCP{}, err
	}
	st, err := s.ctl.Inspect(ctx, handleOf(sess))
	if err != nil {
		return SessionMCP{}, err
	}
	if st.Phase == executors.PhaseLost || st.MCPURL == "" {
		return SessionMCP{}, fmt.Errorf("session %q does not answer: %s: %w", id, st.Reason, errdefs.ErrUnavailable)
	}
	return SessionMCP{URL: st.MCPURL, BearerToken: st.MCPToken, StdioCommand: st.StdioCommand}, nil
}
