package providers_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/internal/providers"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw  string
		want providers.Provider
		ok   bool
	}{
		{"github", providers.GitHub, true},
		{"  GitHub\t", providers.GitHub, true},
		{"GITLAB", providers.GitLab, true},
		{"\ngitlab ", providers.GitLab, true},
		{"", "", false},
		{"   ", "", false},
		{"local", "", false},
		{"bitbucket", "", false},
		{"git hub", "", false},
		{"github,gitlab", "", false},
		{"github\x00", "", false},
		{"gitlab.com", "", false},
		{"G\u0130THUB", "", false},  // dotted capital I folds to i in Unicode
		{"GITLAB\u212a", "", false}, // Kelvin sign folds to k in Unicode
		{"\u00a0github", "", false}, // no-break space is not trimmed
		{"github\u0085", "", false}, // nor is NEL
		{"\v\fGitHub\r\n", providers.GitHub, true},
	}
	for _, c := range cases {
		t.Run(c.raw, func(t *testing.T) {
			t.Parallel()
			got, ok := providers.Normalize(c.raw)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestOfUnionsAndFailsClosed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		raw  []string
		want string
	}{
		{"none", nil, ""},
		{"blank and local", []string{"", "local", " LOCAL "}, ""},
		{"unknown only", []string{"bitbucket", "gitea"}, ""},
		{"github", []string{"github"}, "github"},
		{"gitlab", []string{"GitLab"}, "gitlab"},
		{"both, reverse order", []string{"gitlab", "github"}, "github,gitlab"},
		{"mixed case duplicates", []string{"GITHUB", "github", " GitHub "}, "github"},
		{"mixed with unknown", []string{"local", "gitlab", "", "svn", "Github"}, "github,gitlab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := providers.Of(c.raw...)
			assert.Equal(t, c.want, s.String())
			assert.Equal(t, c.want == "", s.IsEmpty())
		})
	}
}

func TestSetOperations(t *testing.T) {
	t.Parallel()
	gh := providers.Of("github")
	gl := providers.Of("gitlab")
	both := gh.Union(gl)

	assert.Equal(t, both, gl.Union(gh), "union is commutative")
	assert.Equal(t, gh, gh.Union(providers.Set{}), "empty set is the identity")
	assert.Equal(t, []providers.Provider{providers.GitHub, providers.GitLab}, both.List())
	assert.Equal(t, []string{"github", "gitlab"}, both.Strings())
	assert.Equal(t, 2, both.Len())
	assert.Equal(t, 0, providers.Set{}.Len())
	assert.True(t, both.Has(providers.GitLab))
	assert.False(t, gh.Has(providers.GitLab))
	assert.False(t, both.Has("local"), "a value outside the allowlist is never a member")
	assert.Equal(t, gh, gh.With("local"), "With ignores values outside the allowlist")
	assert.Equal(t, both, providers.Of(both.Strings()...), "Strings round-trips through Of")
	assert.Equal(t, providers.All(), both.List())
	assert.Empty(t, providers.Set{}.Strings())
}

// oracle is an independent statement of the allowlist rule: strip ASCII
// white space from both ends, lower-case ASCII letters, compare exactly.
func oracle(raw string) string {
	b := []byte(raw)
	isSpace := func(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	lower := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 32
		}
		lower[i] = c
	}
	if s := string(lower); s == "github" || s == "gitlab" {
		return s
	}
	return ""
}

// FuzzOf checks Normalize and Of against the oracle on arbitrary input: no
// input yields a provider the oracle would not, alone or in a union, and a
// set's string form round-trips.
func FuzzOf(f *testing.F) {
	for _, seed := range [][2]string{
		{"github", "gitlab"}, {"GITHUB", " gitlab\n"}, {"", "local"}, {"gitlab.com", "git\u0131hub"},
		{"G\u0130THUB", "gitla\u212a"}, {"github\x00", "\tGitLab\u00a0"}, {"\vGiTlAb\f", "GITHUB "},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, raw := range []string{a, b} {
			p, ok := providers.Normalize(raw)
			if want := oracle(raw); string(p) != want || ok != (want != "") {
				t.Fatalf("Normalize(%q) = %q, %v; the rule says %q", raw, p, ok, want)
			}
		}
		s := providers.Of(a, b)
		want := map[string]bool{}
		for _, raw := range []string{a, b} {
			if o := oracle(raw); o != "" {
				want[o] = true
			}
		}
		if s.Len() != len(want) {
			t.Fatalf("Of(%q, %q) = %v; the rule says %v", a, b, s, want)
		}
		for _, p := range s.Strings() {
			if !want[p] {
				t.Fatalf("Of(%q, %q) holds %q; the rule says %v", a, b, p, want)
			}
		}
		if got := providers.Of(s.Strings()...); got != s {
			t.Fatalf("round trip of %v gave %v", s, got)
		}
	})
}
