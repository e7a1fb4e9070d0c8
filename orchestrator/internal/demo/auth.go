package demo

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func bearerClient(token string) *http.Client { return &http.Client{Transport: bearer{token}} }

// randomToken makes a stand-in's token: random, never printed.
func randomToken(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
