package connections

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
)

// counted is the HTTP client of p's forge clients: the configured one (or
// forge's default), its requests counted by the metrics.
func (c *Connections) counted(p providers.Provider) *http.Client {
	if c.metrics == nil {
		return c.httpClient
	}
	hc := &http.Client{Timeout: forge.DefaultHTTPTimeout}
	if c.httpClient != nil {
		copied := *c.httpClient
		hc = &copied
	}
	hc.Transport = c.metrics.ProviderTransport(string(p), hc.Transport)
	return hc
}

// acquire takes a place among the calls in flight on key's connection to
// p, recording how long it waited, or that the queue was full.
func (c *Connections) acquire(ctx context.Context, key string, p providers.Provider) (func(), error) {
	start := time.Now()
	release, err := c.limiter.Acquire(ctx, key, string(p))
	if RateLimited(err) {
		c.metrics.RateLimited(string(p), metrics.RateLimitQueueFull)
	} else if err == nil {
		c.metrics.QueueWait(string(p), time.Since(start))
	}
	return release, err
}

// observed records a provider's rate limit met by a call on a connection
// to p: the connection now waits for its retry-after.
func (c *Connections) observed(p providers.Provider, err error) {
	var fe *forge.Error
	if errors.As(err, &fe) && fe.Code == forge.CodeRateLimited {
		c.metrics.RateLimited(string(p), metrics.RateLimitProvider)
	}
}
