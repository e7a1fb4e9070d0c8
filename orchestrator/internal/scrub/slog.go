package scrub

import (
	"context"
	"fmt"
	"log/slog"
)

// NewHandler returns a slog.Handler that scrubs every record — message,
// attributes and groups, whether given with the record or With — with
// the set's Scrubber at that moment, and passes it to next.
func NewHandler(next slog.Handler, set *Set) slog.Handler {
	return &handler{next: next, set: set}
}

type handler struct {
	next slog.Handler
	set  *Set
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	s := h.set.Scrubber()
	out := slog.NewRecord(r.Time, r.Level, s.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(s.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	s := h.set.Scrubber()
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = s.attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean), set: h.set}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), set: h.set}
}

// attr scrubs an attribute's key and value. Values that cannot hold text
// (numbers, times, durations, booleans) are kept; anything else is
// scrubbed as the text a handler would print, and kept as it is when that
// text holds nothing to remove.
func (s *Scrubber) attr(a slog.Attr) slog.Attr {
	a.Key = s.String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(s.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = s.attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case []byte:
			text = string(x)
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if clean := s.String(text); clean != text {
			a.Value = slog.StringValue(clean)
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
