package connections

import (
	"context"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
)

// gated is a lease's client: each call is refused without a provider
// request while the connection is rate limited, and a rate limit it
// meets is recorded for the connection.
type gated struct {
	c        forge.Client
	conns    *Connections
	key      string
	provider providers.Provider
}

// call runs one provider call through the connection's gate.
func call[T any](g *gated, fn func() (T, error)) (T, error) {
	if err := g.conns.blocked(g.key, g.provider); err != nil {
		var zero T
		return zero, err
	}
	v, err := fn()
	g.conns.limiter.Observe(g.key, err)
	g.conns.observed(g.provider, err)
	return v, err
}

func (g *gated) Observe(ctx context.Context, repo forge.Repo, number int64) (forge.Observation, error) {
	return call(g, func() (forge.Observation, error) { return g.c.Observe(ctx, repo, number) })
}

func (g *gated) Reviewers(ctx context.Context, repo forge.Repo, number int64) ([]string, error) {
	return call(g, func() ([]string, error) { return g.c.Reviewers(ctx, repo, number) })
}

func (g *gated) Merge(ctx context.Context, repo forge.Repo, number int64) error {
	_, err := call(g, func() (struct{}, error) { return struct{}{}, g.c.Merge(ctx, repo, number) })
	return err
}

func (g *gated) CurrentUser(ctx context.Context) (string, error) {
	return call(g, func() (string, error) { return g.c.CurrentUser(ctx) })
}

func (g *gated) Create(ctx context.Context, repo forge.Repo, in forge.CreateInput) (forge.Change, error) {
	return call(g, func() (forge.Change, error) { return g.c.Create(ctx, repo, in) })
}

func (g *gated) Status(ctx context.Context, repo forge.Repo, number int64) (forge.Status, error) {
	return call(g, func() (forge.Status, error) { return g.c.Status(ctx, repo, number) })
}

func (g *gated) Comments(ctx context.Context, repo forge.Repo, number int64) ([]toolapi.Comment, error) {
	return call(g, func() ([]toolapi.Comment, error) { return g.c.Comments(ctx, repo, number) })
}

func (g *gated) Reply(ctx context.Context, repo forge.Repo, number int64, threadID, body string) (toolapi.Comment, error) {
	return call(g, func() (toolapi.Comment, error) { return g.c.Reply(ctx, repo, number, threadID, body) })
}

func (g *gated) RequestReviewers(ctx context.Context, repo forge.Repo, number int64, usernames []string) ([]string, error) {
	return call(g, func() ([]string, error) { return g.c.RequestReviewers(ctx, repo, number, usernames) })
}
