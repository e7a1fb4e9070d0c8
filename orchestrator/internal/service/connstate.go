package service

import (
	"time"

	"github.com/toolscope/toolscope/internal/providers"
)

// RateLimitWait returns how long the workspace's connection to p is left
// alone after a provider's rate limit; zero when it is not (or the
// service has no connections component).
func (s *Service) RateLimitWait(workspaceID string, p providers.Provider) time.Duration {
	if s.conns == nil {
		return 0
	}
	return s.conns.RateLimitWait(workspaceID, p)
}
