package service

import (
	"net/url"
	"strings"
)

// tokenPrefixes start GitHub and GitLab secrets. A value with one of them
// is a secret pasted where its reference (an environment variable name)
// belongs; it is refused and never echoed back.
var tokenPrefixes = []string{
	"ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_",
	"glpat-", "gldt-", "glrt-", "gloas-", "glptt-", "glcbt-", "glimt-", "glft-", "glsoat-",
}

func looksLikeToken(s string) bool {
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

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
