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

// FuzzOf shows that no input, alone or in a union, ever yields a provider
// outside the allowlist, and that a set's string form round-trips.
func FuzzOf(f *testing.F) {
	for _, seed := range [][2]string{
		{"github", "gitlab"}, {"GITHUB", " gitlab\n"}, {"", "local"}, {"gitlab.com", "git\u0131hub"},
		{"G\u0130THUB", "gitla\u212a"}, {"github\x00", "\tGitLab\u00a0"},
	} {
		f.Add(seed[0], seed[1])
	}
	allowed := map[string]bool{}
	for _, p := range providers.All() {
		allowed[string(p)] = true
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if p, ok := providers.Normalize(a); ok && !allowed[string(p)] {
			t.Fatalf("Normalize(%q) = %q, outside the allowlist", a, p)
		} else if !ok && p != "" {
			t.Fatalf("Normalize(%q) returned %q with ok=false", a, p)
		}
		s := providers.Of(a, b)
		for _, p := range s.Strings() {
			if !allowed[p] {
				t.Fatalf("Of(%q, %q) holds %q, outside the allowlist", a, b, p)
			}
		}
		if got := providers.Of(s.Strings()...); got != s {
			t.Fatalf("round trip of %v gave %v", s, got)
		}
		if want := providers.Of(a).Union(providers.Of(b)); s != want {
			t.Fatalf("Of(%q, %q) = %v, union of parts = %v", a, b, s, want)
		}
	})
}
