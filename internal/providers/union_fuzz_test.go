package providers_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
)

// splitRaw turns one fuzzed string into several raw provider values: the
// unit separator (0x1f) ends a value. It never trims or folds, so what
// reaches Of is exactly what the fuzzer wrote, white space, NULs and
// non-ASCII bytes included.
func splitRaw(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x1f")
}

// ruleUnion is the oracle's statement of a union: the distinct values the
// allowlist rule keeps, in the canonical order github, gitlab.
func ruleUnion(raws ...[]string) []string {
	kept := map[string]bool{}
	for _, group := range raws {
		for _, r := range group {
			if o := oracle(r); o != "" {
				kept[o] = true
			}
		}
	}
	out := []string{}
	for _, p := range []string{"github", "gitlab"} {
		if kept[p] {
			out = append(out, p)
		}
	}
	return out
}

// FuzzUnion checks Set.Union on two groups of raw values against the
// oracle: Of(a...).Union(Of(b...)) is Of(a..., b...), union is
// commutative, idempotent and has the empty set as identity, every member
// is allowlisted, and the list and string forms are canonical (sorted, no
// repeats, lower case, the string form is the list joined by commas).
func FuzzUnion(f *testing.F) {
	testutil.AddFuzzSeeds(f, []testutil.FuzzSeed{
		{Name: "one-each", Args: []any{"github", "gitlab"}},
		{Name: "both-in-one-group", Args: []any{"gitlab\x1fgithub", ""}},
		{Name: "case-space-and-local", Args: []any{"GITHUB\x1f gitlab\n\x1flocal", "GitLab\x1fGitHub"}},
		{Name: "empty", Args: []any{"", ""}},
		{Name: "blank-values", Args: []any{"\x1f\x1f", "\x1f"}},
		{Name: "unicode-look-alikes", Args: []any{"G\u0130THUB\x1fgitla\u212a", "github\x00\x1f\u00a0gitlab"}},
		{Name: "malformed", Args: []any{"github,gitlab\x1fgit hub", "gitlab.com\x1fgit\u0131hub"}},
		{Name: "ascii-space-and-repeats", Args: []any{"\v\fGiTlAb\r\n\x1fbitbucket", "GITHUB \x1fgithub\x1fGitHub"}},
		{Name: "invalid-utf8", Args: []any{"\xffgithub\x1fgit\xc0hub", "gitlab\xff"}},
		{Name: "huge", Args: []any{strings.Repeat(" ", 4096) + "github" + strings.Repeat("\t", 4096), strings.Repeat("gitlab\x1f", 512)}},
	})
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, rb := splitRaw(a), splitRaw(b)
		sa, sb := providers.Of(ra...), providers.Of(rb...)
		u := sa.Union(sb)

		if whole := providers.Of(append(slices.Clone(ra), rb...)...); u != whole {
			t.Fatalf("Of(%q).Union(Of(%q)) = %v, but Of of both groups = %v", ra, rb, u, whole)
		}
		if want := ruleUnion(ra, rb); !slices.Equal(u.Strings(), want) {
			t.Fatalf("Of(%q).Union(Of(%q)) = %q; the rule says %q", ra, rb, u.Strings(), want)
		}
		if v := sb.Union(sa); v != u {
			t.Fatalf("union is not commutative: %v ∪ %v = %v, but the other way %v", sa, sb, u, v)
		}
		if u.Union(u) != u || u.Union(sa) != u || u.Union(sb) != u {
			t.Fatalf("union is not idempotent on %v", u)
		}
		if u.Union(providers.Set{}) != u || (providers.Set{}).Union(u) != u {
			t.Fatalf("the empty set is not the identity of %v", u)
		}
		for _, s := range []providers.Set{sa, sb} {
			for _, p := range s.List() {
				if !u.Has(p) {
					t.Fatalf("%v ∪ %v lost %q", sa, sb, p)
				}
			}
		}
		list := u.List()
		if len(list) != u.Len() || u.IsEmpty() != (len(list) == 0) {
			t.Fatalf("%v: Len %d, IsEmpty %v, List %q disagree", u, u.Len(), u.IsEmpty(), list)
		}
		for i, p := range list {
			if p != providers.GitHub && p != providers.GitLab {
				t.Fatalf("%v holds %q, outside the allowlist", u, p)
			}
			if i > 0 && list[i-1] >= p {
				t.Fatalf("%v lists %q: not canonical (sorted, no repeats)", u, list)
			}
			if u.Strings()[i] != string(p) {
				t.Fatalf("%v: Strings %q and List %q disagree", u, u.Strings(), list)
			}
		}
		if got, want := u.String(), strings.Join(u.Strings(), ","); got != want {
			t.Fatalf("String() = %q, want %q", got, want)
		}
		if back := providers.Of(strings.Split(u.String(), ",")...); back != u {
			t.Fatalf("%q does not round-trip through Of: %v", u.String(), back)
		}
	})
}
