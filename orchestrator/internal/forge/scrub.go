package forge

import (
	"bytes"
	"io"
	"net/http"

	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// maxErrorBody is how much of an error answer is read (and scrubbed); the
// rest is dropped.
const maxErrorBody = 1 << 20

// scrubErrors removes the client's credential (and token-shaped strings,
// and credential headers) from every error answer as it arrives, before
// the API client parses it: some proxies and self-managed instances echo
// the request's Authorization or PRIVATE-TOKEN header in their error
// bodies, and a provider's message becomes an Error's message, which
// reaches agents, events, logs and API callers.
type scrubErrors struct {
	base  http.RoundTripper
	scrub *scrub.Scrubber
}

func (s *scrubErrors) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 || resp.Body == nil {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	if err != nil {
		body = nil // a body cut short is no message
	}
	clean := s.scrub.String(string(body))
	resp.Body = io.NopCloser(bytes.NewReader([]byte(clean)))
	resp.ContentLength = int64(len(clean))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// withScrubbedErrors returns a copy of hc whose error answers are scrubbed
// of token.
func withScrubbedErrors(hc *http.Client, token string) *http.Client {
	out := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = &scrubErrors{base: base, scrub: scrub.New(token)}
	return &out
}
