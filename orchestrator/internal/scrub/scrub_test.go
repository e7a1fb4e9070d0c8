package scrub_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

const (
	ghToken = "ghp_R4nd0mL00k1ngT0kenABCDEFGHIJ0123456"
	glToken = "glpat-xY9zW8vU7tS6rR5qQ4pP"
	opaque  = "8f3c1a9e2b7d4f60a1c3e5b7d9f1a3c5" // a legacy token: no prefix
)

func TestTokenShapes(t *testing.T) {
	t.Parallel()
	s := scrub.New()
	for in, want := range map[string]string{
		"bad credentials for " + ghToken:                      "bad credentials for ghp_[redacted]",
		"gho_abcdefghij1234 ghu_abcdefghij1234":               "gho_[redacted] ghu_[redacted]",
		"ghs_abcdefghij1234, ghr_abcdefghij1234.":             "ghs_[redacted], ghr_[redacted].",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop":     "github_pat_[redacted]",
		"token " + glToken + " rejected":                      "token glpat-[redacted] rejected",
		"glpat-abcdefghij.01.0123456789 and gloas-abcdefgh12": "glpat-[redacted] and gloas-[redacted]",
		"glrt-abcdefgh1234 gldt-abcdefgh1234 glptt-abcdefgh1": "glrt-[redacted] gldt-[redacted] glptt-[redacted]",
		"glcbt-abcdefgh1234 glft-abcdefgh1234":                "glcbt-[redacted] glft-[redacted]",
		"api token tsat_ABCDEFGHIJKLMNOPQRSTUVWXYZ234567 ok":  "api token tsat_[redacted] ok",
		"tsat_aB3-_xYzaB3-_xYz":                               "tsat_[redacted]",
		// Too short to be a token, or no prefix: left alone.
		"ghp_ short, ghp_abc, the ghs_total field": "ghp_ short, ghp_abc, the ghs_total field",
		"nothing secret here":                      "nothing secret here",
	} {
		assert.Equal(t, want, s.String(in), in)
	}
}

func TestCredentialHeaders(t *testing.T) {
	t.Parallel()
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + opaque))
	s := scrub.New()
	for in, want := range map[string]string{
		"Authorization: Bearer abc.def-123":                    "Authorization: Bearer [redacted]",
		"authorization: token " + ghToken:                      "authorization: token [redacted]",
		"AUTHORIZATION=Basic " + basic:                         "AUTHORIZATION=Basic [redacted]",
		`{"Authorization":"Bearer x1y2z3"}`:                    `{"Authorization":"Bearer [redacted]"}`,
		`{"headers":{"Authorization":["Bearer x1y2z3"]}}`:      `{"headers":{"Authorization":["Bearer [redacted]"]}}`,
		"map[Authorization:[token s3cr3t]]":                    "map[Authorization:[token [redacted]]]",
		"Proxy-Authorization: Negotiate YII=":                  "Proxy-Authorization: Negotiate [redacted]",
		"PRIVATE-TOKEN: " + opaque:                             "PRIVATE-TOKEN: [redacted]",
		`"private-token": "` + opaque + `"`:                    `"private-token": "[redacted]"`,
		"X-Api-Key=" + opaque + "; next":                       "X-Api-Key=[redacted]; next",
		"sent Bearer eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl":         "sent Bearer [redacted]",
		"use Basic " + basic + " then":                         "use Basic [redacted] then",
		"GET /api?access_token=" + opaque + "&page=2":          "GET /api?access_token=[redacted]&page=2",
		"clone https://oauth2:" + opaque + "@gitlab.com/a.git": "clone https://oauth2:[redacted]@gitlab.com/a.git",
		// Words, not credentials.
		"Bearer authentication is required":      "Bearer authentication is required",
		"Basic authentication is off":            "Basic authentication is off",
		"the Authorization header is missing":    "the Authorization header is missing",
		"see https://docs.example.com:8443/path": "see https://docs.example.com:8443/path",
	} {
		assert.Equal(t, want, s.String(in), in)
	}
}

func TestKnownValuesInEveryForm(t *testing.T) {
	t.Parallel()
	secret := `0p4que"<&>/+=` + opaque
	s := scrub.New(secret, "short")
	assert.Equal(t, 1, s.Values(), "a value under MinValue is not known")
	js, err := json.Marshal(secret)
	require.NoError(t, err)
	for _, text := range []string{
		secret,
		string(js),
		url.QueryEscape(secret),
		url.PathEscape(secret),
		base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.URLEncoding.EncodeToString([]byte(secret)),
		base64.StdEncoding.EncodeToString([]byte("u:" + secret)),    // at another alignment
		base64.RawURLEncoding.EncodeToString([]byte("ab" + secret)), // and the third
		"truncated: " + secret[:scrub.MinFragment] + "…",
		"…" + secret[len(secret)-scrub.MinFragment:] + " cut at the start",
	} {
		out := s.String("before " + text + " after")
		assert.NotContains(t, out, opaque[:scrub.MinFragment], text)
		assert.Contains(t, out, scrub.Redacted, text)
		assert.True(t, strings.HasPrefix(out, "before ") && strings.HasSuffix(out, " after"), out)
	}
	assert.Equal(t, "it is short", s.String("it is short"))
}

func TestJSONStaysValid(t *testing.T) {
	t.Parallel()
	s := scrub.New(opaque, `quote"d-value-1234`)
	doc := []byte(`{"z":1,"text":"auth ` + opaque + ` failed","n":12345678901234567890,` +
		`"list":["Bearer x1y2z3w4",{"quote\"d-value-1234":"` + ghToken + `"}]}`)
	out := s.JSON(doc)
	require.True(t, json.Valid(out), string(out))
	assert.NotContains(t, string(out), opaque)
	assert.NotContains(t, string(out), ghToken)
	assert.NotContains(t, string(out), "x1y2z3w4")
	assert.Contains(t, string(out), `12345678901234567890`, "numbers keep their precision")
	assert.Contains(t, string(out), `"[redacted]":"ghp_[redacted]"`, "keys are scrubbed")
	clean := []byte(`{"b":1,"a":"nothing here"}`)
	assert.Equal(t, clean, s.JSON(clean), "a clean document is returned as it is")
}

// TestTailLeavesNoPieceOfASecret: a process's last output is cut to a
// size, and its buffer drops older output; either cut can split a secret,
// and no piece of it of MinValue bytes or more may remain.
func TestTailLeavesNoPieceOfASecret(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-ABCDEFGHIJKLMNOP"
	s := scrub.New(secret)
	for name, text := range map[string]string{
		"whole":                       "auth failed with " + secret + " (401)",
		"the buffer starts inside it": secret[9:] + " rejected",
		"the output ends inside it":   "retrying with " + secret[:10],
		"the cut splits it":           strings.Repeat("x", 600) + " key " + secret + strings.Repeat("y", 500),
	} {
		out := s.Tail(text, 512)
		assert.LessOrEqual(t, len(out), 512+len("…")+len(scrub.Redacted), name)
		for k := scrub.MinValue; k <= len(secret); k++ {
			for i := 0; i+k <= len(secret); i++ {
				if piece := secret[i : i+k]; strings.Contains(out, piece) {
					t.Errorf("%s: %q is in %q", name, piece, out)
				}
			}
		}
	}
	assert.Equal(t, "nothing secret here", s.Tail("nothing secret here", 512))
}

func TestSetIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	var set scrub.Set
	assert.Equal(t, "ghp_[redacted] x", set.Scrubber().String("ghp_abcdefgh1234 x"), "an empty set still removes tokens")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := fmt.Sprintf("value-%d-%s", i, opaque)
			set.Add(v, v)
			assert.Equal(t, "x [redacted] y", set.Scrubber().String("x "+v+" y"))
		})
	}
	wg.Wait()
	assert.Equal(t, 8, set.Scrubber().Values())
	before := set.Scrubber()
	set.Add("value-1-" + opaque)
	assert.Same(t, before, set.Scrubber(), "nothing new: the same scrubber")
	var none *scrub.Set
	none.Add(opaque)
	assert.Equal(t, opaque, none.Scrubber().String(opaque))
}

// FuzzScrub: whatever the text and the values, the output holds no known
// value and no piece of one of MinFragment bytes, and scrubbing again
// changes nothing.
func FuzzScrub(f *testing.F) {
	f.Add("auth failed: Authorization: Bearer "+opaque, opaque, "ghp_abcdefgh1234")
	f.Add(strings.Repeat(opaque[:10], 3)+opaque, opaque, opaque[4:20])
	f.Add(`{"a":"`+opaque+`"}`, opaque, "x")
	f.Add("https://u:"+opaque+"@h/?token="+glToken, glToken, opaque)
	f.Fuzz(func(t *testing.T, text, v1, v2 string) {
		values := []string{tokenAlphabet(v1), tokenAlphabet(v2)}
		s := scrub.New(values...)
		out := s.String(text)
		for _, v := range values {
			if len(v) < scrub.MinValue || strings.Contains(scrub.Redacted, v) {
				continue
			}
			if strings.Contains(out, v) {
				t.Fatalf("%q is in %q (from %q)", v, out, text)
			}
			for i := 0; i+scrub.MinFragment <= len(v); i++ {
				if strings.Contains(out, v[i:i+scrub.MinFragment]) {
					t.Fatalf("piece %q of %q is in %q", v[i:i+scrub.MinFragment], v, out)
				}
			}
		}
		if again := s.String(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", text, out, again)
		}
	})
}

// tokenAlphabet maps s onto the characters credentials are made of.
func tokenAlphabet(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:/+="
	b := []byte(s)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// BenchmarkScrub: a 4 KiB provider error body, without and with secrets
// in it (an echoed Authorization header, an echoed PRIVATE-TOKEN with a
// known value, a GitLab token), scrubbed with three known values; the
// floor is one pass over the same bytes (strings.ToLower, which copies).
func BenchmarkScrub(b *testing.B) {
	s := scrub.New(opaque, glToken, "another-credential-value-0123")
	clean := strings.Repeat(`{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}],`+
		`"documentation_url":"https://docs.github.com/rest/pulls/pulls#create-a-pull-request"}`+"\n", 30)[:4096]
	echo := " echo: Authorization: Bearer " + ghToken + " PRIVATE-TOKEN: " + opaque + " " + glToken
	hits := clean[:4096-len(echo)] + echo
	for _, c := range []struct{ name, text string }{{"4KiB-clean", clean}, {"4KiB-hits", hits}} {
		b.Run(c.name, func(b *testing.B) {
			var figure, floor benchstats.Samples
			for b.Loop() {
				floor.Time(func() { _ = strings.ToLower(c.text) })
				figure.Time(func() { _ = s.String(c.text) })
			}
			benchstats.Report(b, figure, floor)
			b.ReportMetric(float64(len(c.text)), "bytes")
		})
	}
}

// TestTokenHintsCoverEveryPrefix: the token rule is tried only where a
// hint is; every prefix must start with one.
func TestTokenHintsCoverEveryPrefix(t *testing.T) {
	t.Parallel()
	for _, p := range scrub.TokenPrefixes {
		assert.Equal(t, p+scrub.Redacted, scrub.New().String(p+"abcdefgh1234"), p)
	}
}
