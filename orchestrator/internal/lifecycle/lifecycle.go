// Package lifecycle acts on the automation settings of the tasks' pull and
// merge requests.
//
// A Poller polls, per workspace connection, every open change request
// linked to a task, with one status call each (forge.Client.Observe), and
// turns the answer into an Update: the status plus the reviewer
// observation, carried with an explicit validity marker. The evaluator
// consumes the Update: it loads only that change request's options and
// checkpoint (one targeted query), compares the observed reviewers with
// the workspace's persisted username (case-insensitively), and acts —
// prompts the agent, merges — once per transition, as the checkpoint
// records. An Update without a valid observation falls back to one
// targeted reviewers call; a missing username acts on nothing and says so.
// The observation itself is never stored.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/periodic"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// Update is what one poll of a change request produced, on its way to the
// evaluator.
type Update struct {
	TaskID       string
	RepositoryID string
	Provider     providers.Provider
	Repo         forge.Repo
	Number       int64
	// Username is the workspace's persisted authenticated username for the
	// provider ("" when the connection was never validated).
	Username    string
	Observation forge.Observation
}

// Deliverer hands a stored prompt to the task's live sessions.
type Deliverer func(ctx context.Context, p model.Prompt)

// Options configure a Poller.
type Options struct {
	Store *store.Store
	// Connections resolves, gates and builds the provider clients, shared
	// with the tool calls so that a rate limit either meets pauses both;
	// nil: a component of the poller's own (environment and files).
	Connections *connections.Connections
	// Deliver pushes prompts to live sessions; prompts are stored either way.
	Deliver Deliverer
	Log     *slog.Logger
	// Lease, if set, is asked before each workspace connection is polled
	// and must report whether this poller holds the connection's lease
	// (name: PollLease): of several replicas on one database, one polls
	// each connection (ADR 0027). Nil: this poller polls every one.
	Lease func(ctx context.Context, name string) bool
}

// PollLease is the name of the lease on polling a workspace connection.
func PollLease(workspaceID string, provider providers.Provider) string {
	return "poller:" + workspaceID + ":" + string(provider)
}

// Poller polls change requests and acts on their automation settings.
type Poller struct {
	opts Options
}

// New returns a Poller.
func New(opts Options) *Poller {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Connections == nil {
		opts.Connections = connections.New(opts.Store, connections.Options{})
	}
	return &Poller{opts: opts}
}

// Run polls every interval until ctx ends.
func (p *Poller) Run(ctx context.Context, interval time.Duration) {
	_ = periodic.Run(ctx, interval, func(ctx context.Context) error {
		if err := p.Cycle(ctx); err != nil && ctx.Err() == nil {
			p.opts.Log.Warn("lifecycle poll", "error", err.Error())
		}
		return nil
	})
}

// Cycle polls every open change request of every workspace connection
// once.
func (p *Poller) Cycle(ctx context.Context) error {
	workspaces, err := p.opts.Store.ListWorkspaces(ctx)
	if err != nil {
		return err
	}
	for _, ws := range workspaces {
		for _, conn := range ws.Connections {
			p.pollConnection(ctx, ws, conn)
		}
	}
	return nil
}

func (p *Poller) pollConnection(ctx context.Context, ws model.Workspace, conn model.Connection) {
	log := p.opts.Log.With("workspace_id", ws.ID, "provider", string(conn.Provider))
	if p.opts.Lease != nil && !p.opts.Lease(ctx, PollLease(ws.ID, conn.Provider)) {
		log.Debug("not polled here: another replica holds the connection's poll lease")
		return
	}
	open, err := p.opts.Store.OpenChangeRequests(ctx, ws.ID, conn.Provider)
	if err != nil || len(open) == 0 {
		return
	}
	for _, cr := range open {
		repo, err := p.opts.Store.GetRepository(ctx, cr.RepositoryID)
		if err != nil {
			continue
		}
		if !p.pollChangeRequest(ctx, log, ws, conn, cr, repo) {
			return
		}
	}
}

// pollChangeRequest polls one change request on a lease of its
// connection (the credential resolved now, a place among the
// connection's calls in flight) and evaluates the answer. It reports
// false when the connection cannot be used now (rate limited, its
// credential unavailable), so the cycle leaves the connection's other
// change requests alone.
func (p *Poller) pollChangeRequest(ctx context.Context, log *slog.Logger, ws model.Workspace, conn model.Connection,
	cr model.ChangeRequest, repo model.Repository) bool {
	lease, err := p.opts.Connections.Open(ctx, ws.ID, conn)
	switch {
	case connections.RateLimited(err):
		log.Debug("not polled: the connection is rate limited", "reason", err.Error())
		return false
	case err != nil:
		log.Warn("cannot poll", "reason", err.Error())
		return false
	}
	defer lease.Release()
	obs, err := lease.Client.Observe(ctx, forge.Repo{Path: repo.Path}, cr.Number)
	if err != nil {
		log.Warn("poll a change request", "task_id", cr.TaskID, "number", cr.Number, "error", err.Error())
		return !connections.RateLimited(err)
	}
	u := Update{TaskID: cr.TaskID, RepositoryID: cr.RepositoryID, Provider: conn.Provider, Repo: forge.Repo{Path: repo.Path},
		Number: cr.Number, Username: conn.Username, Observation: obs}
	if err := p.Evaluate(ctx, u, lease.Client); err != nil {
		log.Warn("evaluate a change request", "task_id", cr.TaskID, "number", cr.Number, "error", err.Error())
	}
	return true
}

// Evaluate consumes one Update: it decides and performs the actions its
// change request's settings ask for, each once per transition.
func (p *Poller) Evaluate(ctx context.Context, u Update, client forge.Client) error {
	cr, cp, err := p.opts.Store.Evaluation(ctx, u.TaskID, u.RepositoryID)
	if err != nil {
		return err
	}
	kind := "pull request"
	if u.Provider == providers.GitLab {
		kind = "merge request"
	}
	what := fmt.Sprintf("%s #%d", kind, u.Number)
	next := cp
	var prompts []model.Prompt
	var events []model.Event
	prompt := func(format string, args ...any) {
		text := fmt.Sprintf(format, args...)
		prompts = append(prompts, model.Prompt{Text: text, Link: u.Observation.URL})
		events = append(events, model.Event{Kind: model.EventPrompted, Message: text})
	}
	skip := func(reason string) {
		next.SkippedReason = reason
		if reason != cp.SkippedReason {
			events = append(events, model.Event{Kind: model.EventLifecycleSkipped, Message: what + ": " + reason})
		}
	}
	next.SkippedReason = ""

	switch u.Observation.State {
	case "merged":
		if !cp.Merged {
			next.Merged = true
			if cr.Automation.PromptOnMerged {
				prompt("Your %s was merged: %s", what, u.Observation.URL)
			}
		}
	case "closed":
		if !cp.Closed {
			next.Closed = true
			if cr.Automation.PromptOnClosed {
				prompt("Your %s was closed without being merged: %s", what, u.Observation.URL)
			}
		}
	default:
		reviewers, err := p.reviewers(ctx, u, client)
		switch {
		case err != nil:
			skip("the reviewers could not be read: " + err.Error())
		case u.Username == "":
			// Fail closed: without the workspace's own username no review
			// request can be recognized.
			skip("the workspace's " + string(u.Provider) + " username is unknown; run 'toolscope workspace connect' to validate the connection")
		default:
			requested := false
			for _, r := range reviewers {
				if strings.EqualFold(r, u.Username) {
					requested = true
				}
			}
			switch {
			case requested && cp.ReviewRequestedUser == "":
				next.ReviewRequestedUser = u.Username
				if cr.Automation.PromptOnReviewRequested {
					prompt("A review of %s was requested from %s: %s", what, u.Username, u.Observation.URL)
				}
			case requested && !strings.EqualFold(cp.ReviewRequestedUser, u.Username):
				// The account's username changed: the same request, rebound.
				next.ReviewRequestedUser = u.Username
			case !requested:
				next.ReviewRequestedUser = ""
			}
		}
		if u.Observation.Checks == "failing" && cp.ChecksFailedSHA != u.Observation.HeadSHA {
			next.ChecksFailedSHA = u.Observation.HeadSHA
			if cr.Automation.AutoFixChecks {
				prompt("Checks failed on %s at commit %s: fix them and push: %s", what, short(u.Observation.HeadSHA), u.Observation.URL)
			}
		}
		if cr.Automation.AutoMerge && u.Observation.Green && cp.AutoMergedSHA != u.Observation.HeadSHA {
			if err := client.Merge(ctx, u.Repo, u.Number); err != nil {
				skip("auto-merge failed: " + err.Error())
			} else {
				next.AutoMergedSHA = u.Observation.HeadSHA
				events = append(events, model.Event{Kind: model.EventAutoMerged,
					Message: fmt.Sprintf("merged %s automatically: checks passed and it was approved", what)})
			}
		}
	}
	if next == cp && len(prompts) == 0 && len(events) == 0 {
		return nil
	}
	stored, err := p.opts.Store.Act(ctx, u.TaskID, u.RepositoryID, next, prompts, events)
	if err != nil {
		return err
	}
	for _, pr := range stored {
		if p.opts.Deliver != nil {
			p.opts.Deliver(ctx, pr)
		}
	}
	return nil
}

// reviewers returns the observed reviewers, or asks the provider once when
// the update carries no valid observation.
func (p *Poller) reviewers(ctx context.Context, u Update, client forge.Client) ([]string, error) {
	if u.Observation.Reviewers.Valid {
		return u.Observation.Reviewers.Usernames, nil
	}
	got, err := client.Reviewers(ctx, u.Repo, u.Number)
	var fe *forge.Error
	if errors.As(err, &fe) {
		return nil, errors.New(fe.Message)
	}
	return got, err
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
