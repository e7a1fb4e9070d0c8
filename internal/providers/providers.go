// Package providers is the one place that decides which review providers a
// value names. Every hop that carries a provider set (store, API, executors,
// agentctl) normalizes through it, so a provider outside the allowlist can
// never reach a tool registry.
//
// Normalization trims surrounding ASCII white space and lower-cases ASCII
// letters; the result is kept only if it is exactly on the allowlist
// {github, gitlab}. Only ASCII is folded, so look-alikes such as "GİTHUB"
// (dotted capital I) or a Kelvin sign are unknown, not github. Blank, "local",
// unknown and malformed values contribute nothing: the allowlist fails
// closed, and an empty set means "no provider tools", never "all of them".
package providers

import (
	"strings"
)

// Provider is an allowlisted review provider.
type Provider string

// The allowlisted providers.
const (
	GitHub Provider = "github"
	GitLab Provider = "gitlab"
)

// allowlist is the canonical order of every provider a Set can hold. A
// Set's bit i stands for allowlist[i].
var allowlist = [...]Provider{GitHub, GitLab}

// All returns every allowlisted provider in canonical order.
func All() []Provider { return append([]Provider(nil), allowlist[:]...) }

// Normalize maps a raw provider value to an allowlisted provider. ok is
// false for anything outside the allowlist.
func Normalize(raw string) (p Provider, ok bool) {
	s := strings.Trim(raw, asciiSpace)
	for _, a := range allowlist {
		if len(s) == len(a) && equalFoldASCII(s, string(a)) {
			return a, true
		}
	}
	return "", false
}

const asciiSpace = " \t\n\v\f\r"

// equalFoldASCII reports whether s equals the lower-case ASCII string
// lower when ASCII upper-case letters of s are lower-cased. Bytes outside
// ASCII never match.
func equalFoldASCII(s, lower string) bool {
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Set is an immutable set of allowlisted providers. The zero value is the
// empty set. Sets are comparable with ==.
type Set struct{ mask uint8 }

// Of returns the set of the allowlisted providers among raw values; values
// outside the allowlist are dropped.
func Of(raw ...string) Set {
	var s Set
	for _, r := range raw {
		if p, ok := Normalize(r); ok {
			s = s.With(p)
		}
	}
	return s
}

// With returns s with p added. p must be an allowlisted Provider; any other
// value leaves s unchanged.
func (s Set) With(p Provider) Set {
	for i, a := range allowlist {
		if a == p {
			s.mask |= 1 << i
		}
	}
	return s
}

// Union returns the providers in s or o.
func (s Set) Union(o Set) Set { return Set{mask: s.mask | o.mask} }

// Has reports whether p is in s.
func (s Set) Has(p Provider) bool {
	for i, a := range allowlist {
		if a == p {
			return s.mask&(1<<i) != 0
		}
	}
	return false
}

// IsEmpty reports whether s holds no provider.
func (s Set) IsEmpty() bool { return s.mask == 0 }

// Len returns the number of providers in s.
func (s Set) Len() int {
	n := 0
	for i := range allowlist {
		if s.mask&(1<<i) != 0 {
			n++
		}
	}
	return n
}

// List returns the providers of s in canonical order.
func (s Set) List() []Provider {
	out := make([]Provider, 0, len(allowlist))
	for i, a := range allowlist {
		if s.mask&(1<<i) != 0 {
			out = append(out, a)
		}
	}
	return out
}

// Strings returns the providers of s in canonical order, as strings.
func (s Set) Strings() []string {
	out := make([]string, 0, len(allowlist))
	for _, p := range s.List() {
		out = append(out, string(p))
	}
	return out
}

// String returns the providers joined by commas, for example
// "github,gitlab"; the empty set is "".
func (s Set) String() string { return strings.Join(s.Strings(), ",") }
