// Package attached is the table of sessions a backend holds a link to:
// the sessions whose agentctl — a process, a container, a pod, one per
// session — this orchestrator launched or re-attached. The local, docker
// and kubernetes backends keep one each; what differs between them (how a
// handle names the session, how its agentctl is started, watched and
// removed) stays in the backend.
//
// It is a package of its own, not part of package executors, because it
// holds *agentlink.Link, and agentlink imports executors.
package attached

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// Session is what the table knows of a held session; a backend's session
// type embeds it and adds its own.
type Session struct {
	// ID is the session's id.
	ID string
	// Link is the link to the session's agentctl. A backend that dials
	// after the session is known sets it with Table.SetLink.
	Link *agentlink.Link
	// Exit ends when the session's agentctl is gone.
	Exit *executors.Exit

	stopped  bool // guarded by Table.mu: stopped on request
	stopping bool // guarded by Table.mu: Stop was called, so an exit is no loss
}

// NewSession is a session of agentctl's link, whose agentctl is not
// gone yet; link may be nil until Table.SetLink.
func NewSession(id string, link *agentlink.Link) Session {
	return Session{ID: id, Link: link, Exit: executors.NewExit()}
}

func (s *Session) session() *Session { return s }

// Held is a backend's session type: a pointer to a struct embedding
// Session.
type Held interface {
	comparable
	session() *Session
}

// ProbeTimeout bounds Adopt's wait for agentctl.
const ProbeTimeout = 10 * time.Second

// Adopt takes a session over after an orchestrator restart, on a link
// dialed to the agentctl started for it: the link may carry the session
// (agentlink.Link.Adopt), agentctl must answer for it, and the Attach
// stream must come up, within ProbeTimeout. what names the agentctl
// ("agentctl in pod ts-x-1"). It fails with executors.ErrLost; the caller
// lets go of the link.
func Adopt(ctx context.Context, link *agentlink.Link, sessionID, what string) error {
	link.Adopt(sessionID)
	probe, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	// A dead agentctl refuses the connection at once; this fails fast
	// where waiting for the Attach stream would wait out the timeout.
	if _, err := link.State(probe, sessionID); err != nil {
		return fmt.Errorf("%s does not answer for session %q: %v: %w", what, sessionID, err, executors.ErrLost)
	}
	if err := link.WaitAttached(probe); err != nil {
		return fmt.Errorf("attach to %s: %v: %w", what, err, executors.ErrLost)
	}
	return nil
}

// Table holds a backend's sessions by a key of its choice (a session id,
// a container id, a pod name). The zero Table is empty and ready.
type Table[K comparable, S Held] struct {
	mu sync.Mutex
	m  map[K]S
}

// NotAttached is the error of a session this orchestrator does not hold:
// what names the session's agentctl ("container 0123456789ab").
func NotAttached(what string) error {
	return fmt.Errorf("%s is not attached to this orchestrator (re-attach first): %w", what, errdefs.ErrNotFound)
}

// Put holds s under k, in place of any session held there before.
func (t *Table[K, S]) Put(k K, s S) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[K]S{}
	}
	t.m[k] = s
}

// Get returns the session held under k.
func (t *Table[K, S]) Get(k K) (S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	return s, ok
}

// Lookup returns the session held under k for which match (if not nil)
// holds, or NotAttached(what).
func (t *Table[K, S]) Lookup(k K, what string, match func(S) bool) (S, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	if !ok || (match != nil && !match(s)) {
		var none S
		return none, NotAttached(what)
	}
	return s, nil
}

// Running reports whether the session held under k has an agentctl that
// is not gone and was not stopped.
func (t *Table[K, S]) Running(k K) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	return ok && !s.session().Exit.Gone() && !s.session().stopped
}

// Lost reports whether the end of s's agentctl is a loss to report: s is
// still the session held under k, and was not being stopped.
func (t *Table[K, S]) Lost(k K, s S) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[k] == s && !s.session().stopping && !s.session().stopped
}

// SetLink sets s's link, for a backend that dials once the session's
// agentctl runs (and may end meanwhile).
func (t *Table[K, S]) SetLink(s S, l *agentlink.Link) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.session().Link = l
}

// CloseLink closes s's link, if it has one: once the agentctl is gone, a
// link left open would redial it for as long as the orchestrator runs.
func (t *Table[K, S]) CloseLink(s S) {
	t.mu.Lock()
	l := s.session().Link
	t.mu.Unlock()
	if l != nil {
		_ = l.Close()
	}
}

// Endpoint is how the orchestrator reaches s; complete adds what only
// the backend knows to a status (it may be nil).
func (t *Table[K, S]) Endpoint(s S, complete func(*executors.Status)) executors.Endpoint {
	c := s.session()
	return executors.Endpoint{
		SessionID: c.ID, Agentctl: c.Link,
		Down:     executors.DownFrom(func() bool { t.mu.Lock(); defer t.mu.Unlock(); return c.stopped }, c.Exit),
		Complete: complete,
	}
}

// Stop stops s as every backend does: it marks s stopping (its
// agentctl's end is no loss from now on), asks agentctl to stop the
// session within grace unless agentctl is gone, closes the link, runs
// end (the backend's part: ending the process, removing the container or
// the pod), and marks s stopped.
func (t *Table[K, S]) Stop(ctx context.Context, s S, grace time.Duration, end func()) {
	c := s.session()
	t.mu.Lock()
	c.stopping = true
	t.mu.Unlock()
	if !c.Exit.Gone() {
		stopCtx, cancel := context.WithTimeout(ctx, grace)
		_, _ = c.Link.StopSession(stopCtx, c.ID)
		cancel()
	}
	t.CloseLink(s)
	end()
	t.mu.Lock()
	c.stopped = true
	t.mu.Unlock()
}

// Release lets go of s: it closes the link and no longer holds s under
// k (a session held there since stays).
func (t *Table[K, S]) Release(k K, s S) {
	t.CloseLink(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[k] == s {
		delete(t.m, k)
	}
}

// Drain lets go of every session: it holds none any more, closes their
// links and returns them, for the backend's part.
func (t *Table[K, S]) Drain() []S {
	t.mu.Lock()
	all := make([]S, 0, len(t.m))
	for _, s := range t.m {
		all = append(all, s)
	}
	clear(t.m)
	t.mu.Unlock()
	for _, s := range all {
		t.CloseLink(s)
	}
	return all
}
