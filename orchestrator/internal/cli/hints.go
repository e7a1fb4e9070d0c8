package cli

import (
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/internal/providers"
)

// warnf prints a warning on stderr unless --quiet.
func (a *app) warnf(format string, args ...any) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, "toolscope: warning: "+format+"\n", args...)
	}
}

// warnProvider warns about a provider value that looks like a typo of an
// allowlisted one, or that carries spaces. The value is still stored as
// given (package providers decides what it names); the warning only makes
// the rule heard.
func (a *app) warnProvider(raw string) {
	if p, ok := providers.Normalize(raw); ok {
		if strings.TrimSpace(raw) != raw {
			a.warnf("provider %q is stored as given, spaces included; did you mean %q?", raw, p)
		}
		return
	}
	if near := nearestProvider(raw); near != "" {
		a.warnf("provider %q is not one the task gets tools for (stored as given); did you mean %q?", raw, near)
	}
}

// nearestProvider is the allowlisted provider raw is a likely typo of, or "":
// one edit away (two for longer values), a swap of neighbours counting one.
func nearestProvider(raw string) providers.Provider {
	s := strings.ToLower(strings.TrimSpace(raw))
	limit := 1
	if len(s) >= 6 {
		limit = 2
	}
	for _, p := range providers.All() {
		if editDistance(s, string(p)) <= limit {
			return p
		}
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
