// Package textlimit is the one statement of the bounds on free text that
// a person (through the API) or an agent (through a tool call) types and
// toolscope stores or forwards to a provider: how long each kind may be,
// and which characters it may hold.
//
// Lengths count characters (Unicode code points), as the providers do.
// No kind holds a control character (C0, DEL, C1: NUL, ESC, ...), except
// that multi-line kinds may hold line feeds, carriage returns and tabs.
// A refusal is an *errdefs.FieldError naming the field and the limit.
package textlimit

import (
	"unicode"
	"unicode/utf8"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// Kind is one kind of free text.
type Kind struct {
	// Max is the most characters it may hold.
	Max int
	// MultiLine allows \n, \r and \t.
	MultiLine bool
}

// The kinds, and where each applies. docs/operations.md#limits lists them.
var (
	// Name: a workspace's name; a reviewer's username; a review thread's id.
	Name = Kind{Max: 100}
	// Title: a task's title; a pull or merge request's title (GitHub's
	// limit is 256).
	Title = Kind{Max: 256}
	// Branch: a pull or merge request's source and target branch.
	Branch = Kind{Max: 255}
	// Path: a repository's path (owner/name, group/project or a local
	// directory).
	Path = Kind{Max: 4096}
	// Reason: why a person rejected an agent's request; the agent reads it.
	Reason = Kind{Max: 500, MultiLine: true}
	// Text: a task's description; a pull or merge request's body; a reply
	// in a review thread (GitHub's limit on bodies is 65,536); each of a
	// launch's agent arguments, and all of them together.
	Text = Kind{Max: 65536, MultiLine: true}
)

// Check refuses value, the request field named field, if it is longer than
// k allows or holds a character k does not. An empty value passes: whether
// a field is required is the caller's rule.
func (k Kind) Check(field, value string) error {
	if !utf8.ValidString(value) {
		return errdefs.InvalidField(field, "is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(value); n > k.Max {
		return errdefs.InvalidField(field, "is %d characters long; the limit is %d", n, k.Max)
	}
	for i, r := range []rune(value) {
		if !unicode.IsControl(r) || k.MultiLine && (r == '\n' || r == '\r' || r == '\t') {
			continue
		}
		if k.MultiLine {
			return errdefs.InvalidField(field, "contains a control character (%U) at character %d; only line feeds, carriage returns and tabs are allowed", r, i+1)
		}
		return errdefs.InvalidField(field, "contains a control character (%U) at character %d; it must be one line of printable text", r, i+1)
	}
	return nil
}
