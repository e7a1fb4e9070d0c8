package store

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Page asks a listing, in its order (creation time, then id), for the
// items after After, at most Limit of them. The zero Page is the whole
// listing.
type Page struct {
	After Cursor
	// Limit is the most items returned; 0: no limit.
	Limit int
}

// Cursor is a position in a listing: the creation time and id of the
// item a page ends with. The zero Cursor is the listing's start.
type Cursor struct {
	Created time.Time
	ID      string
}

// IsZero reports whether c is the listing's start.
func (c Cursor) IsZero() bool { return c.ID == "" && c.Created.IsZero() }

// where returns the condition on the columns created_at and id of alias
// (with a trailing dot, or "") that keeps the items after p.After, and its
// arguments; "" when p starts at the listing's start. It compares the
// stored text, as the listings' ORDER BY does, so a page continues
// exactly where the previous one ended, in either dialect and collation.
func (p Page) where(alias string) (string, []any) {
	if p.After.IsZero() {
		return "", nil
	}
	return `(` + alias + `created_at, ` + alias + `id) > (?, ?)`, []any{formatTime(p.After.Created), p.After.ID}
}

// limit is p's LIMIT clause, or "".
func (p Page) limit() string {
	if p.Limit <= 0 {
		return ""
	}
	return ` LIMIT ` + strconv.Itoa(p.Limit)
}

// and joins SQL conditions into a WHERE clause ("" for none).
func and(conds ...string) string {
	out := ""
	for _, c := range conds {
		switch {
		case c == "":
		case out == "":
			out = ` WHERE ` + c
		default:
			out += ` AND ` + c
		}
	}
	return out
}

// MaxMessageBytes bounds the text the orchestrator itself writes into a
// record from what other components tell it (an executor's or agentctl's
// error, an agent's last output): an event's message and a session's
// status message. Longer text is cut, on a character boundary, and marked
// so: every event fits its own message of the event stream, and every
// session a page of a listing, whatever they were told.
const MaxMessageBytes = 64 << 10

// maxCheckoutErrorBytes bounds the same for each of a session's
// checkouts' errors (a session holds one checkout per task repository).
const maxCheckoutErrorBytes = 4 << 10

// clipMarker ends text clip cut.
const clipMarker = " … (cut)"

// clip returns s if it is at most max bytes, or its first bytes, cut on a
// character boundary and marked, in max bytes.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max - len(clipMarker)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + clipMarker
}
