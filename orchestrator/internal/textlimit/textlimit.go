// Package textlimit is the one statement of the bounds on free text that
// a person (through the API) or an agent (through a tool call) types and
// toolscope stores or forwards to a provider: how long each kind may be,
// and which characters it may hold.
//
// Lengths count bytes of UTF-8, not characters: bytes are what a gRPC
// message (4 MiB by default), a listing's page and a database row are
// made of, and a character takes 1 to 4 of them, so a bound in
// characters let 4-byte characters (emoji, 𝕏) carry four times the bytes
// it meant to allow. A bound in bytes is also a bound in characters at
// least as tight, so the providers' limits, which count characters, still
// hold: text in ASCII has the room it had, text in other scripts less.
// No kind holds a control character (C0, DEL, C1: NUL, ESC, ...), except
// that multi-line kinds may hold line feeds, carriage returns and tabs.
// A refusal is an *errdefs.FieldError naming the field and the limit in
// bytes.
package textlimit

import (
	"unicode"
	"unicode/utf8"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// Kind is one kind of free text.
type Kind struct {
	// Max is the most bytes (UTF-8) it may hold.
	Max int
	// MultiLine allows \n, \r and \t.
	MultiLine bool
}

// The kinds, and where each applies. docs/operations.md#limits lists them.
var (
	// Name: a workspace's name; a repository's provider (stored as
	// given); a reviewer's username; a review thread's id.
	Name = Kind{Max: 100}
	// Title: a task's title; a pull or merge request's title (GitHub's
	// limit is 256 characters); a session's model, and the names of the
	// environment variables it passes (a connection's is held to 256
	// too).
	Title = Kind{Max: 256}
	// Branch: a pull or merge request's source and target branch.
	Branch = Kind{Max: 255}
	// Host: a repository's host, with its port (a DNS name is at most 253
	// bytes, ":65535" 6 more).
	Host = Kind{Max: 259}
	// Path: a repository's path (owner/name, group/project or a local
	// directory); a credential file's path; a session's working directory
	// and image.
	Path = Kind{Max: 4096}
	// URL: a repository's clone URL; a connection's API base URL.
	URL = Kind{Max: 8192}
	// Reason: why a person rejected an agent's request; the agent reads it.
	Reason = Kind{Max: 500, MultiLine: true}
	// Text: a task's description; a pull or merge request's body; a reply
	// in a review thread (GitHub's limit on bodies is 65,536 characters);
	// each of a launch's agent arguments, and all of them together.
	Text = Kind{Max: 65536, MultiLine: true}
)

// Check refuses value, the request field named field, if it is longer
// (in bytes) than k allows or holds a character k does not. An empty
// value passes: whether a field is required is the caller's rule.
func (k Kind) Check(field, value string) error {
	if !utf8.ValidString(value) {
		return errdefs.InvalidField(field, "is not valid UTF-8")
	}
	if err := k.CheckBytes(field, len(value), ""); err != nil {
		return err
	}
	i := 0
	for _, r := range value {
		i++
		if !unicode.IsControl(r) || k.MultiLine && (r == '\n' || r == '\r' || r == '\t') {
			continue
		}
		if k.MultiLine {
			return errdefs.InvalidField(field, "contains a control character (%U) at character %d; only line feeds, carriage returns and tabs are allowed", r, i)
		}
		return errdefs.InvalidField(field, "contains a control character (%U) at character %d; it must be one line of printable text", r, i)
	}
	return nil
}

// CheckBytes refuses n bytes of text in the request field named field if
// k allows fewer; what, if set, says what the n bytes are ("in all").
func (k Kind) CheckBytes(field string, n int, what string) error {
	if n <= k.Max {
		return nil
	}
	if what == "" {
		what = "long"
	}
	return errdefs.InvalidField(field, "is %d bytes %s; the limit is %d bytes", n, what, k.Max)
}
