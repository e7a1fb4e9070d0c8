package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/periodic"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// Replicas (ADR 0027). Several orchestrator processes may share one
// PostgreSQL database. Each is a replica with an id (Options.Replica) and
// a lease in the database ("replica:<id>") that it renews every
// LeaseRenew for LeaseTTL, by the database's clock. A live session is
// owned by one replica (Session.Owner), and only its owner acts on it:
// pushes its surface, inspects, stops, resumes, re-attaches. When an
// owner's lease expires, the next replica to renew its own lease claims
// the session (store.ClaimSessions) and takes it over: it re-attaches a
// docker or remote session and pushes it its current surface; a local
// session ran on its owner's host and is recorded lost, with the cause.
//
// A replica that cannot renew its lease for LeaseTTL (measured on its own
// monotonic clock from the last renewal it started, so no clock skew
// lengthens it) stops acting on any session at once, and RunReplica
// returns ErrLeaseLost: another replica may own its sessions by then, and
// its links to their agentctls would contend with the new owner's, so the
// process ends (fail-stop) and a restart finds which sessions are still
// its own. SQLite has one process, so the one replica holds its lease
// uncontended.

// Defaults of the replica lease (Options.LeaseTTL, Options.LeaseRenew).
const (
	DefaultLeaseTTL   = 15 * time.Second
	DefaultLeaseRenew = 5 * time.Second
)

// replicaState is the service's own lease.
type replicaState struct {
	id         string
	ttl, renew time.Duration
	// until is the monotonic time (time.Time with its monotonic reading)
	// up to which this replica's lease surely holds; nil before the first
	// renewal, when the service acts as the only replica (tests without
	// RunReplica).
	until atomic.Pointer[time.Time]
	// adopted: this replica's own sessions from before a restart were
	// claimed (adopt with mine).
	adopted atomic.Bool
}

// LeaseTTL returns how long this replica's lease holds after a renewal.
func (s *Service) LeaseTTL() time.Duration { return s.replica.ttl }

// Replica returns this service's replica id.
func (s *Service) Replica() string { return s.replica.id }

// leaseHeld reports whether this replica may act on the sessions it owns.
func (s *Service) leaseHeld() bool {
	u := s.replica.until.Load()
	return u == nil || time.Now().Before(*u)
}

// owns reports whether this replica acts on sess.
func (s *Service) owns(sess model.Session) bool {
	return sess.Owner == s.replica.id && s.leaseHeld()
}

// notOwned is the error of an action on a session this replica does not
// act on.
func (s *Service) notOwned(sess model.Session) error {
	if sess.Owner == s.replica.id {
		return fmt.Errorf("session %s: this replica (%s) could not renew its lease within %s and acts on no session until it does: %w",
			sess.ID, s.replica.id, s.replica.ttl, store.ErrOwnedElsewhere)
	}
	return store.OwnedElsewhere(sess.ID, sess.Owner)
}

// mine splits sessions into those this replica acts on and the others.
func (s *Service) mine(sessions []model.Session) (own, others []model.Session) {
	for _, sess := range sessions {
		if s.owns(sess) {
			own = append(own, sess)
		} else {
			others = append(others, sess)
		}
	}
	return own, others
}

// renewLease takes or renews this replica's lease and reports whether it
// holds it.
func (s *Service) renewLease(ctx context.Context) bool {
	started := time.Now()
	held, holder, err := s.store.TakeLease(ctx, store.ReplicaLease(s.replica.id), s.replica.id, s.replica.ttl)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "renew the replica lease", "replica", s.replica.id, "error", err.Error())
		return false
	case !held:
		// Another process holds this replica id: a misconfiguration (two
		// replicas with one data directory on one host cannot both start).
		s.log.ErrorContext(ctx, "the replica lease is held by another process", "replica", s.replica.id, "holder", holder)
		return false
	}
	until := started.Add(s.replica.ttl)
	s.replica.until.Store(&until)
	return true
}

// ErrLeaseLost ends a replica that could not renew its lease in time
// (RunReplica). It is an errdefs.ErrUnavailable.
var ErrLeaseLost = fmt.Errorf("this replica could not renew its lease in time; another replica may own its sessions: %w", errdefs.ErrUnavailable)

// RunReplica renews this replica's lease and takes over the sessions of
// replicas whose lease expired, every LeaseRenew until ctx ends (nil) or
// the lease lapses (ErrLeaseLost); Reattach comes first. The lease is not
// given up at the end: it expires, so a replica restarted within LeaseTTL
// finds its sessions still its own (a local session taken over would be
// lost).
func (s *Service) RunReplica(ctx context.Context) error {
	return periodic.Run(ctx, s.replica.renew, func(ctx context.Context) error {
		if !s.renewLease(ctx) {
			if ctx.Err() == nil && !s.leaseHeld() {
				return fmt.Errorf("replica %s, last renewed more than %s ago: %w", s.replica.id, s.replica.ttl, ErrLeaseLost)
			}
			return nil
		}
		// Until a Reattach succeeded, this replica's own sessions from
		// before a restart are still to be re-attached too.
		if attached, lost, err := s.adopt(ctx, !s.replica.adopted.Load()); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "take over sessions", "error", err.Error())
		} else if attached+lost > 0 {
			s.log.InfoContext(ctx, "took sessions over from a replica that went away", "reattached", attached, "lost", lost)
		}
		return nil
	})
}

// Reattach takes this replica's lease and takes over the running sessions
// it owns from before a restart and those no live replica owns; those
// whose agentctl is gone are recorded lost. It reports how many were
// re-attached and lost.
func (s *Service) Reattach(ctx context.Context) (attached, lost int, err error) {
	if !s.renewLease(ctx) {
		return 0, 0, errors.New("cannot take the replica lease")
	}
	attached, lost, err = s.adopt(ctx, true)
	if err != nil {
		return attached, lost, err
	}
	s.sweep(ctx)
	s.PruneLogs(ctx)
	return attached, lost, err
}

// adopt claims the active sessions no live replica owns (and, with mine,
// those this replica owns), re-attaches them and reconciles them.
func (s *Service) adopt(ctx context.Context, mine bool) (attached, lost int, err error) {
	claimed, err := s.store.ClaimSessions(ctx, s.replica.id, mine, func(sess model.Session) bool {
		_, ok := s.execs[sess.Executor] // else a replica with that backend takes it
		return ok
	})
	if err != nil {
		return 0, 0, err
	}
	if mine {
		s.replica.adopted.Store(true)
	}
	var back []model.Session
	for _, c := range claimed {
		sess := c.Session
		from := c.Previous != "" && c.Previous != s.replica.id
		if from {
			s.log.InfoContext(ctx, "taking a session over", "session_id", sess.ID, "from", c.Previous)
		}
		switch {
		case sess.State == model.SessionPending && from:
			s.markLost(ctx, sess, fmt.Sprintf("its replica %s went away during its launch", c.Previous))
			lost++
			continue
		case sess.State == model.SessionPending:
			// Launched by a process that died before recording the outcome.
			s.markLost(ctx, sess, "the orchestrator stopped during its launch")
			lost++
			continue
		case from && sess.Executor == "local":
			s.markLost(ctx, sess, fmt.Sprintf("its replica %s went away (its lease expired); a local session runs on its replica's host and is not taken over", c.Previous))
			lost++
			continue
		}
		if err := s.execs[sess.Executor].Reattach(ctx, handleOf(sess)); err != nil {
			s.markLost(ctx, sess, err.Error())
			lost++
			continue
		}
		attached++
		back = append(back, sess)
	}
	// Batches and catalog changes committed while no replica acted on
	// these sessions, and pushes that failed, are reconciled now, like any
	// other.
	s.reconcileAndWait(ctx, back)
	return attached, lost, nil
}

// act returns sess once this replica may act on it: it owns it, or the
// session is not running and no live replica owns it (then it claims it,
// so a resume or a stop of a failed session is done by one replica). A
// running session of another replica is refused, naming its owner: it is
// taken over only when its owner's lease expires.
func (s *Service) act(ctx context.Context, sess model.Session) (model.Session, error) {
	if s.owns(sess) {
		return sess, nil
	}
	if sess.Owner == s.replica.id || sess.State == model.SessionRunning || sess.State == model.SessionPending {
		return sess, s.notOwned(sess)
	}
	return s.store.ClaimSession(ctx, sess.ID, s.replica.id)
}
