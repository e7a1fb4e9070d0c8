package scrub_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// TestHandlerScrubsEveryPartOfARecord: a value learnt after the logger was
// built is removed too, from the message, attributes (strings, errors,
// byte slices, values of any type), groups and With attributes; a record
// without secrets is printed as it would be without the handler.
func TestHandlerScrubsEveryPartOfARecord(t *testing.T) {
	t.Parallel()
	var set scrub.Set
	var buf bytes.Buffer
	log := slog.New(scrub.NewHandler(slog.NewTextHandler(&buf, nil), &set))
	set.Add(opaque)
	type request struct{ Header map[string]string }
	log.With("conn", "PRIVATE-TOKEN: "+opaque).WithGroup("call").Error("failed with "+opaque,
		"error", errors.New("401: Authorization: Bearer "+ghToken),
		"body", []byte(`{"token":"`+glToken+`"}`),
		"request", request{Header: map[string]string{"Authorization": "token " + opaque}},
		slog.Group("inner", "value", opaque, "n", 42),
		"key "+opaque, "x")
	out := buf.String()
	for _, secret := range []string{opaque, ghToken, glToken} {
		assert.NotContains(t, out, secret)
		assert.NotContains(t, out, secret[4:4+scrub.MinFragment])
	}
	assert.Equal(t, 7, strings.Count(out, scrub.Redacted), out)
	assert.Contains(t, out, "call.inner.n=42")

	var plain, wrapped bytes.Buffer
	slog.New(slog.NewTextHandler(&plain, nil)).Info("clean", "n", 1, "s", "text", "err", errors.New("no such file"))
	slog.New(scrub.NewHandler(slog.NewTextHandler(&wrapped, nil), &set)).Info("clean", "n", 1, "s", "text", "err", errors.New("no such file"))
	assert.Equal(t, strings.SplitN(plain.String(), " ", 2)[1], strings.SplitN(wrapped.String(), " ", 2)[1])
}
