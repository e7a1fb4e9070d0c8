package toolcalls

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// The audit's rate (issue 33). One agent calling in a loop wrote ~350
// tool.called events a second, 2.7 MB for 3,596 calls: the record's size
// was the agent's to choose. Each session now records at most
// DefaultAuditRate calls a second, in bursts of DefaultAuditBurst; the
// calls beyond are counted, not recorded one by one, and the count is
// kept: the session's next recorded call says suppressed=N, and
// FlushAudit records what is still pending once the session is quiet.
// The metrics count every call. The retention (store.PruneAudit) bounds
// what accumulates.

// DefaultAuditRate and DefaultAuditBurst bound the tool.called events one
// session records.
const (
	DefaultAuditRate  = 20 // a second
	DefaultAuditBurst = 100
)

// auditSessions is each recent session's audit limiter and pending count.
type auditSessions struct {
	mu       sync.Mutex
	sessions map[string]*auditSession
	now      func() time.Time // time.Now; tests set it
}

func (a *auditSessions) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

type auditSession struct {
	lim        *rate.Limiter
	suppressed int // calls not recorded since the session's last record
	refused    int // of them, refused ones
	last       time.Time
}

// auditIdle is how long a session with nothing pending keeps its entry.
const auditIdle = time.Minute

// admit reports whether the call of session with outcome is recorded now,
// and, if so, how many of the session's calls were suppressed before it
// (refused among them); those counts are then reset.
func (a *auditSessions) admit(session, outcome string, now time.Time) (ok bool, suppressed, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions == nil {
		a.sessions = map[string]*auditSession{}
	}
	s := a.sessions[session]
	if s == nil {
		if len(a.sessions) >= 4096 {
			a.forgetIdleLocked(now)
		}
		s = &auditSession{lim: rate.NewLimiter(DefaultAuditRate, DefaultAuditBurst)}
		a.sessions[session] = s
	}
	s.last = now
	if !s.lim.AllowN(now, 1) {
		s.suppressed++
		if outcome != "ok" {
			s.refused++
		}
		return false, 0, 0
	}
	suppressed, refused = s.suppressed, s.refused
	s.suppressed, s.refused = 0, 0
	return true, suppressed, refused
}

// pending takes the counts of the sessions quiet for a second or more
// that have suppressed calls, and drops the idle entries.
func (a *auditSessions) pending(now time.Time) map[string][2]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][2]int{}
	for id, s := range a.sessions {
		if s.suppressed > 0 && now.Sub(s.last) >= time.Second {
			out[id] = [2]int{s.suppressed, s.refused}
			s.suppressed, s.refused = 0, 0
		}
	}
	a.forgetIdleLocked(now)
	return out
}

func (a *auditSessions) forgetIdleLocked(now time.Time) {
	for id, s := range a.sessions {
		if s.suppressed == 0 && now.Sub(s.last) >= auditIdle {
			delete(a.sessions, id)
		}
	}
}

// suppressedNote is what a record says of the calls suppressed before it.
func suppressedNote(suppressed, refused int) string {
	if suppressed == 0 {
		return ""
	}
	return fmt.Sprintf(" suppressed_calls=%d suppressed_refused=%d", suppressed, refused)
}

// FlushAudit records, for each session quiet for a second with calls the
// audit's rate suppressed, one tool.called event that counts them. The
// server runs it every few seconds.
func (d *Dispatcher) FlushAudit(ctx context.Context) {
	for id, n := range d.auditRate.pending(d.auditRate.clock()) {
		sess, err := d.store.GetSession(ctx, id)
		if err != nil {
			continue
		}
		ev := model.Event{TaskID: sess.TaskID, Kind: model.EventToolCalled, SessionID: sess.ID,
			Message: "tool=(suppressed) outcome=suppressed" + suppressedNote(n[0], n[1])}
		if err := d.store.AppendEvents(context.WithoutCancel(ctx), ev); err != nil {
			d.log.ErrorContext(ctx, "suppressed tool calls not recorded", "session_id", id, "calls", n[0], "error", err.Error())
		}
	}
}
