package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// The reconciler makes every running session's agentctl show the session's
// desired surface. It is level-triggered: the desired surface is read from
// the records (the task's provider set at its generation, the workspace's
// external tools at the catalog generation, the session's mode), the
// applied one is what the session's agentctl last acknowledged
// (Session.Applied and Session.ExternalGeneration), and a session whose
// applied surface lags its desired one is pushed the parts that lag until
// it does not, with backoff between failed attempts. Whatever can change a
// surface — a committed batch, a catalog change, a launch, a re-attach, a
// resume — only wakes it for the sessions concerned; a restart needs no
// repair path of its own. Each session has at most one worker, so pushes
// to one session never race each other.
//
// needs_repair is derived: every outcome the reconciler records sets it
// to whether the applied surface still lags the desired one.

// DefaultRepairBackoff bounds the wait between two failed attempts to
// bring a session to its desired surface; the first retry comes after the
// push timeout, and each later one after twice the wait before, up to it.
const DefaultRepairBackoff = time.Minute

// Push is the outcome of bringing one session to its desired surface.
type Push struct {
	SessionID string
	Err       error             // nil: the session applies its desired surface
	Applied   model.ProviderSet // what the session's agentctl applied
}

type reconciler struct {
	mu      sync.Mutex
	workers map[string]*worker // by session id, while one runs
	wg      sync.WaitGroup
	// desired holds, per task, the last desired surface read (without
	// the mode) and its version; reading holds the reads in flight, so the
	// sessions of one task woken together read their task's surface once.
	desired map[string]desiredRead
	reading map[taskVersion]*desiredRead
}

// taskVersion is a task's surface version.
type taskVersion struct {
	taskID string
	v      model.SurfaceVersion
}

// desiredRead is a desired surface read from the records at a version
// (the generations it was read at, each part at its own).
type desiredRead struct {
	v    model.SurfaceVersion
	sf   executors.Surface
	err  error
	done chan struct{}
}

// worker brings one session to its desired surface.
type worker struct {
	again   chan struct{} // a wake while it runs: one more round (capacity 1)
	attempt uint64        // attempts started
	waiters []waiter
	// links are the traces that woke it since its last attempt began, at
	// most maxPushLinks: its push's span links to them (trace.go).
	links []trace.Link
}

// waiter wants the outcome of the first attempt that starts after it
// registered (after).
type waiter struct {
	after uint64
	ch    chan Push
}

// reconcile wakes the reconciler for the sessions ids and returns, for
// each, a channel that receives the outcome of its next attempt. The
// trace of ctx, if any, is linked from the pushes the wake leads to.
func (s *Service) reconcile(ctx context.Context, ids ...string) []chan Push {
	link := trace.LinkFromContext(ctx)
	r := &s.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]chan Push, len(ids))
	for i, id := range ids {
		w, ok := r.workers[id]
		if !ok && s.closed() {
			out[i] = make(chan Push, 1)
			out[i] <- Push{SessionID: id, Err: errClosed}
			continue
		}
		if !ok {
			w = &worker{again: make(chan struct{}, 1)}
			r.workers[id] = w
			r.wg.Go(func() { s.work(id, w) })
		}
		select {
		case w.again <- struct{}{}:
		default:
		}
		if link.SpanContext.IsValid() && len(w.links) < maxPushLinks {
			w.links = append(w.links, link)
		}
		out[i] = make(chan Push, 1)
		w.waiters = append(w.waiters, waiter{after: w.attempt, ch: out[i]})
	}
	return out
}

// errClosed answers a wake of a closed service.
var errClosed = errors.New("the orchestrator is stopping")

// closed reports whether Close was called.
func (s *Service) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// reconcileAndWait wakes the reconciler for sessions and waits for the
// outcome of each one's next attempt, at most twice the push timeout (an
// attempt in flight, then the one that reads the latest records).
func (s *Service) reconcileAndWait(ctx context.Context, sessions []model.Session) []Push {
	ids := make([]string, len(sessions))
	for i, sess := range sessions {
		ids[i] = sess.ID
	}
	chans := s.reconcile(ctx, ids...)
	wait, cancel := context.WithTimeout(ctx, 2*s.pushTimeout)
	defer cancel()
	pushes := make([]Push, len(ids))
	for i, ch := range chans {
		select {
		case pushes[i] = <-ch:
		case <-wait.Done():
			pushes[i] = Push{SessionID: ids[i], Err: fmt.Errorf("the session did not answer within %s", s.pushTimeout)}
		}
	}
	return pushes
}

// work runs attempts for one session until it applies its desired surface
// (or is no longer running) and no wake came meanwhile; a failed attempt
// is retried with backoff, sooner if something wakes it.
func (s *Service) work(id string, w *worker) {
	ctx := s.life
	// The first retry comes after one push timeout, the next ones after
	// twice the last, never beyond --repair-backoff (the bound even when
	// the push timeout is longer).
	first := min(s.pushTimeout, s.repairBackoff)
	backoff := first
	failing := false
	for {
		select {
		case <-w.again:
		case <-s.done:
			s.stop(id, w)
			return
		default:
		}
		s.rec.mu.Lock()
		w.attempt++
		attempt, links := w.attempt, w.links
		w.links = nil
		s.rec.mu.Unlock()

		p, settled := s.attempt(ctx, id, failing, links)
		failing = p.Err != nil && !settled

		s.rec.mu.Lock()
		kept := w.waiters[:0]
		for _, wt := range w.waiters {
			if wt.after < attempt {
				wt.ch <- p
			} else {
				kept = append(kept, wt)
			}
		}
		w.waiters = kept
		if settled && len(w.again) == 0 {
			s.rec.retire(id)
			for _, wt := range w.waiters {
				wt.ch <- p
			}
			s.rec.mu.Unlock()
			return
		}
		s.rec.mu.Unlock()
		if !failing {
			backoff = first
			continue // the records moved on meanwhile, or a wake came: another round
		}
		select {
		case <-w.again:
		case <-time.After(backoff):
		case <-s.done:
			s.stop(id, w)
			return
		}
		backoff = min(2*backoff, s.repairBackoff)
	}
}

// stop ends a worker when the service closes.
func (s *Service) stop(id string, w *worker) {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	s.rec.retire(id)
	for _, wt := range w.waiters {
		wt.ch <- Push{SessionID: id, Err: ErrShuttingDown}
	}
	w.waiters = nil
}

// retire forgets a session's worker; with the last one go the desired
// surfaces read, which serve only sessions reconciled together. r.mu is
// held.
func (r *reconciler) retire(id string) {
	delete(r.workers, id)
	if len(r.workers) == 0 {
		clear(r.desired)
	}
}

// desired is the surface a session should show, from the records, at
// version v or later. The surface is a function of the version (every
// change to a task's repositories bumps its provider generation, every
// catalog change the catalog generation), so a read at v serves every
// session of the task that asks at v: the last one is kept per task, and
// sessions asking while it is read wait for that read.
func (s *Service) desired(ctx context.Context, sess model.Session, v model.SurfaceVersion) (executors.Surface, error) {
	r := &s.rec
	r.mu.Lock()
	if d, ok := r.desired[sess.TaskID]; ok && d.v == v {
		r.mu.Unlock()
		return d.withMode(sess.Mode), nil
	}
	key := taskVersion{sess.TaskID, v}
	d, reading := r.reading[key]
	if !reading {
		d = &desiredRead{done: make(chan struct{})}
		r.reading[key] = d
	}
	r.mu.Unlock()
	if reading {
		<-d.done
		return d.withMode(sess.Mode), d.err
	}

	task, err := s.store.GetTask(ctx, sess.TaskID)
	if err == nil {
		d.sf = executors.Surface{Providers: task.Providers.Set, Generation: task.Providers.Generation}
		d.sf.External, d.sf.ExternalGeneration, err = s.externalTools(ctx, task.WorkspaceID)
		// The version read: each part at the generation it was read at.
		d.v = model.SurfaceVersion{WorkspaceID: task.WorkspaceID, ProviderGeneration: d.sf.Generation, CatalogGeneration: d.sf.ExternalGeneration}
	}
	d.err = err
	r.mu.Lock()
	delete(r.reading, key)
	if old, ok := r.desired[sess.TaskID]; err == nil && (!ok || (d.v.ProviderGeneration >= old.v.ProviderGeneration && d.v.CatalogGeneration >= old.v.CatalogGeneration)) {
		r.desired[sess.TaskID] = *d
	}
	r.mu.Unlock()
	close(d.done)
	return d.withMode(sess.Mode), err
}

func (d *desiredRead) withMode(m model.Mode) executors.Surface {
	sf := d.sf
	sf.Mode = m
	return sf
}

// lag is the part of the desired surface a session has not applied: a part
// it applied keeps generation 0, which a push leaves out.
func lag(sess model.Session, desired executors.Surface) executors.Surface {
	out := executors.Surface{Mode: desired.Mode}
	if sess.Applied.Generation < desired.Generation {
		out.Providers, out.Generation = desired.Providers, desired.Generation
	}
	if sess.ExternalGeneration < desired.ExternalGeneration {
		out.External, out.ExternalGeneration = desired.External, desired.ExternalGeneration
	}
	return out
}

// attempt makes one attempt at a session: it pushes the parts of its
// desired surface that lag, if any, and records the outcome. settled is
// true when nothing is left to do: the session applies its desired
// surface, is not running, or its records cannot be read.
func (s *Service) attempt(ctx context.Context, id string, failing bool, links []trace.Link) (p Push, settled bool) {
	sess, v, err := s.store.SessionSurface(ctx, id)
	if err != nil {
		return Push{SessionID: id, Err: err}, true
	}
	p = Push{SessionID: id, Applied: sess.Applied}
	if sess.State != model.SessionRunning {
		p.Err = errdefs.FailedPrecondition("session %s is %s", id, sess.State)
		return p, true
	}
	if !s.owns(sess) {
		p.Err = s.notOwned(sess) // its owner reconciles it (ADR 0027)
		return p, true
	}
	desired, err := s.desired(ctx, sess, v)
	if err != nil {
		s.log.ErrorContext(ctx, "read a session's desired surface", "session_id", id, "error", err.Error())
		p.Err = err
		return p, false
	}
	push := lag(sess, desired)
	if push.Generation == 0 && push.ExternalGeneration == 0 {
		if sess.NeedsRepair {
			s.recordApplied(ctx, sess, desired, push, executors.PushResult{Applied: sess.Applied.Set, Generation: sess.Applied.Generation, ExternalGeneration: sess.ExternalGeneration}, nil)
		}
		return p, true
	}
	push.Orientation = s.orientation(ctx, sess.ID)
	timeout := s.pushTimeout
	var repos map[string]string
	if push.Generation > 0 && sess.Executor != model.ExecutorHosted {
		// Repositories attached since the session's workspace was made:
		// agentctl checks them out before their tools appear, which may
		// take a download.
		if push.Checkouts, repos, err = s.freshCheckouts(ctx, sess); err != nil {
			s.log.ErrorContext(ctx, "read a session's checkouts", "session_id", id, "error", err.Error())
			p.Err = err
			return p, false
		}
		if len(push.Checkouts) > 0 {
			timeout = max(timeout, CheckoutTimeout)
		}
	}
	spanCtx, span := startPush(ctx, sess, push, links)
	pushCtx, cancel := context.WithTimeout(spanCtx, timeout)
	pushed := time.Now()
	res, err := s.ctl.ApplySurface(pushCtx, handleOf(sess), push)
	cancel()
	endPush(span, pushOutcome(err))
	if err != nil && ctx.Err() != nil {
		return Push{SessionID: id, Err: ErrShuttingDown}, true // cancelled by Close: nothing to record
	}
	s.metrics.Push(pushOutcome(err), time.Since(pushed))
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("the session did not answer within %s", timeout)
	}
	if err != nil {
		s.log.WarnContext(ctx, "surface push failed", "session_id", id, "generation", push.Generation,
			"external_generation", push.ExternalGeneration, "error", err.Error())
		if !failing {
			s.recordFailure(ctx, sess, push, err)
		}
		p.Err = err
		return p, false
	}
	p.Applied = model.ProviderSet{Set: res.Applied, Generation: res.Generation}
	if !s.recordApplied(ctx, sess, desired, push, res, repos) {
		// Applied, and the records moved on meanwhile: another round.
		return p, false
	}
	return p, true
}

// recordFailure records a failed push, once per streak of failures: the
// session needs repair (its applied surface lags), and an event per part
// that did not reach it.
func (s *Service) recordFailure(ctx context.Context, sess model.Session, push executors.Surface, cause error) {
	_, err := s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
		if m.State != model.SessionRunning {
			return nil, errStateChanged // it ended meanwhile: nothing to repair
		}
		var evs []model.Event
		m.NeedsRepair = true
		if push.Generation > 0 {
			m.StatusMessage = "provider push failed: " + cause.Error()
			evs = append(evs, model.Event{Kind: model.EventProvidersPushFailed,
				Providers: model.ProviderSet{Set: push.Providers, Generation: push.Generation}, Message: cause.Error()})
		} else {
			m.StatusMessage = "external tools push failed: " + cause.Error()
		}
		if push.ExternalGeneration > 0 {
			evs = append(evs, model.Event{Kind: model.EventExternalToolsPushFailed,
				Message: fmt.Sprintf("generation %d: %v", push.ExternalGeneration, cause)})
		}
		return evs, nil
	})
	if err != nil && !errors.Is(err, errStateChanged) {
		s.log.ErrorContext(ctx, "record a failed push", "session_id", sess.ID, "error", err.Error())
	}
}

// recordApplied records what a session's agentctl applied (never moving
// back to an older generation) and whether it still lags desired, with an
// event per part pushed: providers.pushed for the provider set,
// external_tools.pushed for an external tool set that changed the tools.
// It reports whether the session now applies desired.
func (s *Service) recordApplied(ctx context.Context, sess model.Session, desired, push executors.Surface, res executors.PushResult, repos map[string]string) bool {
	applied := model.ProviderSet{Set: res.Applied, Generation: res.Generation}
	caughtUp := false
	_, err := s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
		if applied.Generation >= m.Applied.Generation {
			m.Applied = applied
		}
		if res.ExternalGeneration > m.ExternalGeneration {
			m.ExternalGeneration = res.ExternalGeneration
		}
		caughtUp = m.Applied.Generation >= desired.Generation && m.ExternalGeneration >= desired.ExternalGeneration
		if caughtUp && m.NeedsRepair && m.State == model.SessionRunning {
			m.NeedsRepair, m.StatusMessage = false, ""
		}
		var evs []model.Event
		if push.Generation > 0 {
			msg := fmt.Sprintf("applied generation %d", applied.Generation)
			if !res.Accepted && applied.Generation > push.Generation {
				msg = fmt.Sprintf("generation %d was stale; the session applies generation %d", push.Generation, applied.Generation)
			}
			if len(res.Checkouts) > 0 {
				st := executors.Status{WorkspaceDir: res.WorkspaceDir, Checkouts: res.Checkouts}
				m.Checkouts = recordCheckouts(m.Checkouts, st, repos)
				msg += describeWorkspace(st)
			}
			evs = append(evs, model.Event{Kind: model.EventProvidersPushed, Providers: applied, Message: msg})
		}
		if push.ExternalGeneration > 0 && res.ToolsChanged {
			// Every catalog change reaches every session; only real changes
			// are events.
			evs = append(evs, model.Event{Kind: model.EventExternalToolsPushed, Message: describeExternal(push.External, res.ExternalGeneration)})
		}
		return evs, nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "record a push", "session_id", sess.ID, "error", err.Error())
		return true
	}
	return caughtUp
}

// running returns the running sessions among sessions.
func running(sessions []model.Session) []model.Session {
	var out []model.Session
	for _, sess := range sessions {
		if sess.State == model.SessionRunning {
			out = append(out, sess)
		}
	}
	return out
}

// pushOutcome is a push's outcome as the metrics name it.
func pushOutcome(err error) string {
	switch {
	case err == nil:
		return metrics.OutcomeOK
	case errors.Is(err, context.DeadlineExceeded):
		return metrics.OutcomeTimeout
	case errors.Is(err, executors.ErrLost):
		return metrics.OutcomeLost
	}
	return metrics.OutcomeFailed
}
