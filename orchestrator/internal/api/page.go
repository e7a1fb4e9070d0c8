package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// The bounds of one page of a listing (ListWorkspaces, ListRepositories,
// ListTasks, ListSessions). A gRPC client refuses a message over 4 MiB
// by default, so the listings that carry free text are answered by pages
// bounded in bytes as well as in items: a page ends at page_size items,
// or before the item that would take its items past MaxPageBytes,
// whichever comes first, and its next_page_token names the rest. A
// request without page_size is answered in one response, or refused if
// that would be more than MaxPageBytes: a client that does not page is
// never handed part of a listing as if it were the whole of it.
const (
	// MaxPageSize is the most items a page holds; a larger page_size asks
	// for this many.
	MaxPageSize = 1000
	// MaxPageBytes bounds a page's items, encoded: half of gRPC's 4 MiB,
	// so a page is far from the limit whatever text its items hold. A
	// page holds at least one item, even one larger than this.
	MaxPageBytes = 2 << 20
	// MaxItemBytes is the most one item of a listing may take, encoded: a
	// page of that one item, with the rest of the response, still fits
	// gRPC's 4 MiB. The bounds on what a record holds (package textlimit,
	// store.MaxTaskRepositories, store.MaxMessageBytes) keep every item
	// below MaxPageBytes; an item above MaxItemBytes (a record written
	// before those bounds) is refused by name, not sent to fail in the
	// transport.
	MaxItemBytes = 4<<20 - 64<<10
)

// firstFetch is how many items a page reads first; later reads ask for
// as many as the items read so far suggest still fit.
const firstFetch = 32

// listing is one List RPC's paging: its records T, sent as messages M.
type listing[T any, M proto.Message] struct {
	// name is the listing's ("tasks"), and parent its request's workspace
	// or task (or "-", or ""): a page token is good for the listing and
	// parent it came from only.
	name, parent string
	// list reads a page of records.
	list func(context.Context, store.Page) ([]T, error)
	// cursor is a record's position in the listing.
	cursor func(T) store.Cursor
	// wire converts a record to its message.
	wire func(T) M
	// describe names a record in an error ("task task_x").
	describe func(T) string
}

// page answers a List request's page_size and page_token: the page's
// messages, and the token of the next page ("" after the last).
func (l listing[T, M]) page(ctx context.Context, size int32, token string) ([]M, string, error) {
	if size < 0 {
		return nil, "", errdefs.InvalidField("page_size", "is %d; give 0 (the whole listing, in one response) or more", size)
	}
	after, err := l.decode(token)
	if err != nil {
		return nil, "", err
	}
	want := int(min(size, MaxPageSize)) // 0: no bound on the count
	var out []M
	total := 0 // the bytes of out's items, encoded
	for {
		n := firstFetch
		if len(out) > 0 {
			n = max(1, (MaxPageBytes-total)/(total/len(out))+1)
		}
		if want > 0 {
			n = min(n, want-len(out))
		}
		// One more than the page needs: whether the listing goes on.
		records, err := l.list(ctx, store.Page{After: after, Limit: n + 1})
		if err != nil {
			return nil, "", err
		}
		for _, r := range records[:min(n, len(records))] {
			m := l.wire(r)
			bytes := protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(m))
			switch {
			case len(out) > 0 && total+bytes > MaxPageBytes:
				return l.full(out, after, want) // the record starts the next page
			case bytes > MaxItemBytes:
				return nil, "", fmt.Errorf("%s is %d bytes encoded, more than a response carries (%d bytes): %w",
					l.describe(r), bytes, MaxItemBytes, errdefs.ErrResourceExhausted)
			}
			out, total, after = append(out, m), total+bytes, l.cursor(r)
		}
		switch {
		case len(records) <= n:
			return out, "", nil // the listing's end
		case want > 0 && len(out) == want:
			return l.full(out, after, want)
		}
	}
}

// full ends a page that holds as much as it may while the listing goes on
// after its last record, after.
func (l listing[T, M]) full(out []M, after store.Cursor, want int) ([]M, string, error) {
	if want == 0 {
		return nil, "", fmt.Errorf("the %s listing is more than %d bytes, more than one response carries; ask for it by pages "+
			"(page_size and page_token, as toolscope's command line does): %w", l.name, MaxPageBytes, errdefs.ErrResourceExhausted)
	}
	return out, l.encode(after), nil
}

// pageToken is what a next_page_token holds (as base64 of its JSON): the
// listing, its parent and the last record's position.
type pageToken struct {
	List    string    `json:"l"`
	Parent  string    `json:"p,omitempty"`
	Created time.Time `json:"t"`
	ID      string    `json:"i"`
}

func (l listing[T, M]) encode(c store.Cursor) string {
	b, err := json.Marshal(pageToken{List: l.name, Parent: l.parent, Created: c.Created, ID: c.ID})
	if err != nil {
		panic(err) // strings and a time always marshal
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decode returns the position token names ("": the listing's start).
func (l listing[T, M]) decode(token string) (store.Cursor, error) {
	if token == "" {
		return store.Cursor{}, nil
	}
	var t pageToken
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.ID == "" || t.List != l.name || t.Parent != l.parent {
		return store.Cursor{}, errdefs.InvalidField("page_token", "is not a page token of this %s listing; give the next_page_token of its previous page, with the same request, or none to start over", l.name)
	}
	return store.Cursor{Created: t.Created, ID: t.ID}, nil
}
