package service

import (
	"net/url"

	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// looksLikeToken: a value starting with a token prefix (scrub.TokenPrefixes)
// is a secret pasted where its reference (an environment variable name)
// belongs; it is refused and never echoed back.
func looksLikeToken(s string) bool { return scrub.HasTokenPrefix(s) }

// urlSecretProblem says why a URL may carry a secret (a password, a
// token-like user, a query or a fragment), or "" if it cannot. The reason
// never echoes the value.
func urlSecretProblem(u *url.URL) string {
	if _, hasPassword := u.User.Password(); hasPassword || looksLikeToken(u.User.Username()) {
		return "must not carry credentials (the value is not shown); connect the workspace with --token-env or --token-file instead"
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "must not have a query or fragment (the value is not shown)"
	}
	return ""
}
