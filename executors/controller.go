package executors

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// Controller is the one place the orchestrator talks to a running
// session's agentctl, whatever backend runs it: it finds the session's
// Endpoint through its executor and makes the call, with one reading of
// what a failure means. A session its backend knows to be stopped is
// refused (errdefs.ErrFailedPrecondition); one whose agentctl is gone, no
// longer hosts it, or does not answer is ErrLost.
type Controller struct {
	execs map[string]Executor
}

// NewController returns the controller of the sessions of execs, by
// backend name.
func NewController(execs map[string]Executor) *Controller {
	return &Controller{execs: execs}
}

// endpoint returns the endpoint of a session that can take a call.
func (c *Controller) endpoint(h Handle) (Endpoint, error) {
	exec, ok := c.execs[h.Backend]
	if !ok {
		return Endpoint{}, fmt.Errorf("executor backend %q is not configured on this orchestrator: %w", h.Backend, errdefs.ErrUnavailable)
	}
	ep, err := exec.Endpoint(h)
	if err != nil {
		return ep, err
	}
	switch phase, why := ep.down(); phase {
	case PhaseStopped:
		return ep, errdefs.FailedPrecondition("session %q is stopped", ep.SessionID)
	case PhaseLost:
		return ep, fmt.Errorf("%s: %w", why, ErrLost)
	}
	return ep, nil
}

// lost reads an error agentctl answered a session's call with: a session
// it no longer hosts (it restarted) or an agentctl that does not answer is
// lost.
func lost(ep Endpoint, err error) error {
	if phase, why := ep.down(); phase == PhaseLost {
		return fmt.Errorf("%s: %w", why, ErrLost) // it ended under the call
	}
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return fmt.Errorf("agentctl no longer hosts session %q (it restarted?): %w", ep.SessionID, ErrLost)
	case errors.Is(err, errdefs.ErrUnavailable):
		return fmt.Errorf("agentctl does not answer (%v): %w", err, ErrLost)
	}
	return err
}

// ApplySurface pushes a surface to a running session (see
// Agentctl.ApplySurface).
func (c *Controller) ApplySurface(ctx context.Context, h Handle, surface Surface) (PushResult, error) {
	ep, err := c.endpoint(h)
	if err != nil {
		return PushResult{}, err
	}
	res, err := ep.Agentctl.ApplySurface(ctx, ep.SessionID, surface)
	if err != nil {
		return res, lost(ep, err)
	}
	return res, nil
}

// Inspect reports a session's status. A session whose agentctl is gone,
// no longer hosts it or does not answer (within the endpoint's probe
// timeout) is PhaseLost, not an error; a stopped one is PhaseStopped.
func (c *Controller) Inspect(ctx context.Context, h Handle) (Status, error) {
	exec, ok := c.execs[h.Backend]
	if !ok {
		return Status{}, fmt.Errorf("executor backend %q is not configured on this orchestrator: %w", h.Backend, errdefs.ErrUnavailable)
	}
	ep, err := exec.Endpoint(h)
	if err != nil {
		return Status{}, err
	}
	if phase, why := ep.down(); phase != "" {
		return Status{Phase: phase, Reason: why}, nil
	}
	probe := ctx
	if ep.ProbeTimeout > 0 {
		var cancel context.CancelFunc
		probe, cancel = context.WithTimeout(ctx, ep.ProbeTimeout)
		defer cancel()
	}
	st, err := ep.Agentctl.State(probe, ep.SessionID)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return Status{Phase: PhaseLost, Reason: fmt.Sprintf("agentctl did not answer within %s", ep.ProbeTimeout)}, nil
		}
		if err := lost(ep, err); errors.Is(err, ErrLost) {
			return Status{Phase: PhaseLost, Reason: err.Error()}, nil
		}
		return st, err
	}
	if ep.Complete != nil {
		ep.Complete(&st)
	}
	return st, nil
}

// Notify sends a message to a session's MCP clients and returns how many
// connected clients it was offered to.
func (c *Controller) Notify(ctx context.Context, h Handle, text string) (int, error) {
	ep, err := c.endpoint(h)
	if err != nil {
		return 0, err
	}
	n, err := ep.Agentctl.Notify(ctx, ep.SessionID, text)
	if err != nil {
		return n, lost(ep, err)
	}
	return n, nil
}

// Deliver pushes a running session's own branch of its checkout of the
// repository key (see Agentctl.Deliver).
func (c *Controller) Deliver(ctx context.Context, h Handle, key string, cred GitCredential) (Delivery, error) {
	ep, err := c.endpoint(h)
	if err != nil {
		return Delivery{}, err
	}
	d, err := ep.Agentctl.Deliver(ctx, ep.SessionID, key, cred)
	if err != nil {
		return d, lost(ep, err)
	}
	return d, nil
}

// Work reports a running session's status with its checkouts' work
// measured now (see Agentctl.Work).
func (c *Controller) Work(ctx context.Context, h Handle) (Status, error) {
	ep, err := c.endpoint(h)
	if err != nil {
		return Status{}, err
	}
	st, err := ep.Agentctl.Work(ctx, ep.SessionID)
	if err != nil {
		return st, lost(ep, err)
	}
	if ep.Complete != nil {
		ep.Complete(&st)
	}
	return st, nil
}

// StopSession ends a running session's agent and reports its last status,
// with the work its checkouts hold (see Agentctl.StopSession); the
// executor's Stop ends the rest.
func (c *Controller) StopSession(ctx context.Context, h Handle) (Status, error) {
	ep, err := c.endpoint(h)
	if err != nil {
		return Status{}, err
	}
	st, err := ep.Agentctl.StopSession(ctx, ep.SessionID)
	if err != nil {
		return st, lost(ep, err)
	}
	return st, nil
}

// AgentLog streams a running session's agent log from its agentctl,
// wherever it runs: the last 1 MiB, then, with follow, what the agent
// writes, until it exits, the session stops or ctx ends.
func (c *Controller) AgentLog(ctx context.Context, h Handle, follow bool, fn func([]byte) error) error {
	ep, err := c.endpoint(h)
	if err != nil {
		return err
	}
	return ep.Agentctl.AgentLog(ctx, ep.SessionID, follow, fn)
}
