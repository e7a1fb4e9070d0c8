// Package scrub removes secrets from text that leaves the orchestrator
// toward an agent, a log or an event. It is the one statement of what is
// removed:
//
//   - known values — the credentials the orchestrator resolved — whole, in
//     their JSON-escaped, URL-encoded and base64 forms (at any alignment,
//     so a value inside "Basic base64(user:value)" is found too), and any
//     piece of one of MinFragment bytes or more;
//   - token-shaped strings, known or not: GitHub (ghp_, gho_, ghu_, ghs_,
//     ghr_, github_pat_), GitLab (glpat-, gloas-, glrt-, ...), toolscope
//     API tokens (tsat_);
//   - the values of credential headers (Authorization, Private-Token, ...)
//     and of Bearer and Basic credentials, query parameters named like a
//     token and the password of a URL's user information.
//
// A value shorter than MinValue is not a known value: it would wreck text
// and is no credential anyway. Each is replaced by Redacted; a token keeps
// its prefix (ghp_[redacted]) and a header its name and scheme
// (Authorization: Bearer [redacted]), so a reader knows what was there.
//
// A Scrubber is immutable and safe for concurrent use; a Set holds the
// values the orchestrator has resolved so far and hands out a Scrubber of
// them.
package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Redacted replaces what is removed.
const Redacted = "[redacted]"

// MinValue is the length of the shortest known value (and of the shortest
// encoded form of one) that is replaced; shorter ones are ignored.
const MinValue = 8

// MinFragment is the length of the shortest piece of a known value that is
// replaced wherever it appears.
const MinFragment = 12

// TokenPrefixes start the tokens of GitHub, GitLab and toolscope: a
// string starting with one (and followed by at least 8 token characters)
// is a token wherever it appears.
var TokenPrefixes = []string{
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
	"glpat-", "gloas-", "gldt-", "glrt-", "glrtr-", "glptt-", "glcbt-", "glimt-", "glft-", "glsoat-", "glffct-",
	"glagent-", "glwt-",
	"tsat_",
}

// HasTokenPrefix reports whether s starts with a token prefix.
func HasTokenPrefix(s string) bool {
	return slices.ContainsFunc(TokenPrefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// ContainsTokenPrefix reports whether s holds a token prefix anywhere.
func ContainsTokenPrefix(s string) bool {
	return slices.ContainsFunc(TokenPrefixes, func(p string) bool { return strings.Contains(s, p) })
}

// rule is one pattern and what replaces a match. A match starts where
// one of the rule's hints does (ASCII case folded, unless exact), so the
// pattern is tried only there: text without a hint costs one substring
// search per hint.
type rule struct {
	hints []string
	exact bool
	// after, if set, are the bytes one of which must precede the hint.
	after   string
	re      *regexp.Regexp                    // anchored at the hint
	replace func(text string, m []int) string // m: submatch indexes
}

const (
	tokenChars = `[A-Za-z0-9_\-]`
	// value is a credential's value in a header or a parameter.
	value = `[^\[\s"',;\]{}<>@][^\s"',;\[\]{}<>@]*`
)

var schemes = []string{"bearer", "basic", "token", "bot", "digest", "negotiate", "apikey"}

// rules run in order: credential headers before the tokens they may
// carry, so "Authorization: Bearer ghp_…" keeps its name and scheme.
var rules = []rule{
	{ // Authorization: Bearer x / "Private-Token":"x" / X-Api-Key=x / Authorization:[token x]
		hints: []string{"authorization", "-token", "api-key"},
		re: regexp.MustCompile(`\A(?i)(authorization|-token|api-key)(["']?\s*[:=]\s*\[?\s*["']?)` +
			`((?:` + strings.Join(schemes, "|") + `)\s+)?(` + value + `)`),
		replace: func(text string, m []int) string {
			if m[6] < 0 && slices.Contains(schemes, strings.ToLower(text[m[8]:m[9]])) ||
				strings.HasPrefix(text[m[8]-1:], Redacted) {
				return text[m[0]:m[1]] // the value is gone already
			}
			return text[m[0]:m[8]] + Redacted
		},
	},
	{ // Bearer x, anywhere: x has a digit or a symbol, or is long
		hints: []string{"bearer"},
		re:    regexp.MustCompile(`\A(?i)(bearer\s+)([A-Za-z0-9\-._~+/]{8,}=*)`),
		replace: func(text string, m []int) string {
			v := text[m[4]:m[5]]
			if len(v) < 20 && !strings.ContainsAny(v, "0123456789-._~+/=") {
				return text[m[0]:m[1]] // a word ("Bearer authentication")
			}
			return text[m[0]:m[4]] + Redacted
		},
	},
	{ // Basic x, anywhere: x decodes to user:password
		hints: []string{"basic"},
		re:    regexp.MustCompile(`\A(?i)(basic\s+)([A-Za-z0-9+/]{6,}={0,2})`),
		replace: func(text string, m []int) string {
			b, err := base64.StdEncoding.DecodeString(text[m[4]:m[5]])
			if err != nil {
				b, err = base64.RawStdEncoding.DecodeString(text[m[4]:m[5]])
			}
			if err != nil || !strings.Contains(string(b), ":") {
				return text[m[0]:m[1]]
			}
			return text[m[0]:m[4]] + Redacted
		},
	},
	{ // a token-shaped string (the hints start every prefix)
		hints: []string{"gh", "github_pat_", "gl", "tsat_"}, exact: true,
		re: regexp.MustCompile(`\A(` + strings.Join(quoteAll(TokenPrefixes), "|") + `)` +
			tokenChars + `{8,}(?:\.` + tokenChars + `+)*`),
		replace: func(text string, m []int) string { return text[m[2]:m[3]] + Redacted },
	},
	{ // ?token=x, &access_token=x, ;client_secret=x
		hints: []string{"token=", "secret=", "password=", "api_key=", "apikey="}, after: "?&;_",
		re:      regexp.MustCompile(`\A(?i)((?:token|secret|password|api_key|apikey)=)([^\[\s"'&#;<>][^\s"'&#;<>]*)`),
		replace: func(text string, m []int) string { return text[m[2]:m[3]] + Redacted },
	},
	{ // scheme://user:password@host
		hints: []string{"://"},
		re:    regexp.MustCompile(`\A(://[^/\s:@"'<>]*:)([^\[/\s@"'<>][^/\s@"'<>]*)@`),
		replace: func(text string, m []int) string {
			return text[m[2]:m[3]] + Redacted + "@"
		},
	},
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = regexp.QuoteMeta(w)
	}
	return out
}

// window is how far past a hint a match is first looked for; a match
// that reaches it is looked for again in the whole rest of the text.
const window = 1024

// apply runs the rule over text; lower is text in ASCII lower case.
func (r rule) apply(text, lower string) string {
	in := lower
	if r.exact {
		in = text
	}
	next := make([]int, len(r.hints)) // where each hint occurs next; -1: no more
	for i, h := range r.hints {
		next[i] = strings.Index(in, h)
	}
	var b strings.Builder
	last := 0 // text[:last] is written to b, or replaced
	for pos := 0; ; {
		at := -1
		for i, h := range r.hints {
			if next[i] >= 0 && next[i] < pos {
				if j := strings.Index(in[pos:], h); j >= 0 {
					next[i] = pos + j
				} else {
					next[i] = -1
				}
			}
			if next[i] >= 0 && (at < 0 || next[i] < at) {
				at = next[i]
			}
		}
		if at < 0 {
			break
		}
		pos = at + 1
		if r.after != "" && (at == 0 || !strings.Contains(r.after, text[at-1:at])) {
			continue
		}
		end := min(len(text), at+window)
		m := r.re.FindStringSubmatchIndex(text[at:end])
		if m != nil && at+m[1] == end && end < len(text) {
			m = r.re.FindStringSubmatchIndex(text[at:])
		}
		if m == nil {
			continue
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += at
			}
		}
		b.WriteString(text[last:m[0]])
		b.WriteString(r.replace(text, m))
		last, pos = m[1], max(m[1], pos)
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// asciiLower folds the ASCII letters of s to lower case, byte for byte.
func asciiLower(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Scrubber removes secrets from text. The zero value and nil remove
// token-shaped strings and credential headers only.
type Scrubber struct {
	values   []string          // accepted known values, sorted
	replacer *strings.Replacer // every form of every value → Redacted
	grams    map[string][]gram // gramLen-byte pieces of the values
}

// gram is where a gramLen-byte piece occurs in a value.
type gram struct{ value, at int }

const gramLen = 8

// New returns a Scrubber of values (and of token shapes).
func New(values ...string) *Scrubber { return (*Scrubber)(nil).With(values...) }

// With returns a Scrubber of s's values and values; s itself if none is
// new (or long enough).
func (s *Scrubber) With(values ...string) *Scrubber {
	var all []string
	if s != nil {
		all = slices.Clone(s.values)
	}
	added := false
	for _, v := range values {
		if accepted(v) && !slices.Contains(all, v) {
			all = append(all, v)
			added = true
		}
	}
	if !added && s != nil {
		return s
	}
	slices.Sort(all)
	out := &Scrubber{values: all, grams: map[string][]gram{}}
	var needles []string
	for i, v := range all {
		needles = append(needles, forms(v)...)
		for at := 0; at+gramLen <= len(v); at++ {
			out.grams[v[at:at+gramLen]] = append(out.grams[v[at:at+gramLen]], gram{i, at})
		}
	}
	// Longest first, so a form containing another is replaced whole.
	slices.SortStableFunc(needles, func(a, b string) int { return len(b) - len(a) })
	needles = slices.Compact(needles)
	if len(needles) > 0 {
		pairs := make([]string, 0, 2*len(needles))
		for _, n := range needles {
			pairs = append(pairs, n, Redacted)
		}
		out.replacer = strings.NewReplacer(pairs...)
	}
	return out
}

// accepted reports whether v is scrubbed as a known value: long enough,
// and not a piece of what replaces secrets (which would put it back).
func accepted(v string) bool {
	return len(v) >= MinValue && !strings.Contains(Redacted, v) && !strings.Contains(v, Redacted)
}

// forms returns v as it may appear in text: itself, JSON-escaped,
// URL-encoded, and base64 (standard and URL alphabets) at each of the three
// alignments a value can have inside a longer encoded text — only the
// characters that depend on v alone.
func forms(v string) []string {
	out := []string{v}
	if q, err := json.Marshal(v); err == nil {
		out = append(out, string(q[1:len(q)-1]))
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := range 3 {
			full := enc.EncodeToString(append(make([]byte, k), v...))
			from := (8*k + 5) / 6        // the first character with no bit of the padding
			to := (8 * (k + len(v))) / 6 // the last complete one
			out = append(out, full[from:to])
		}
	}
	return slices.DeleteFunc(out, func(f string) bool { return len(f) < MinValue })
}

// Values reports how many known values s removes.
func (s *Scrubber) Values() int {
	if s == nil {
		return 0
	}
	return len(s.values)
}

// String returns text without secrets.
func (s *Scrubber) String(text string) string {
	if s != nil && s.replacer != nil {
		text = s.replacer.Replace(text)
		text = s.fragments(text)
	}
	lower := asciiLower(text)
	for _, r := range rules {
		if out := r.apply(text, lower); out != text {
			text, lower = out, asciiLower(out)
		}
	}
	return text
}

// fragments replaces every piece of MinFragment bytes or more of a known
// value. Every such piece holds a gram starting at a multiple of 4, so
// only those positions are looked up.
func (s *Scrubber) fragments(text string) string {
	var spans [][2]int
	for p := 0; p+gramLen <= len(text); p += 4 {
		if len(spans) > 0 && p < spans[len(spans)-1][1] {
			continue
		}
		best := [2]int{p, p}
		for _, g := range s.grams[text[p:p+gramLen]] {
			v := s.values[g.value]
			l, r, at := p, p+gramLen, g.at
			for l > 0 && at > 0 && text[l-1] == v[at-1] {
				l, at = l-1, at-1
			}
			for end := g.at + gramLen; r < len(text) && end < len(v) && text[r] == v[end]; {
				r, end = r+1, end+1
			}
			if r-l > best[1]-best[0] {
				best = [2]int{l, r}
			}
		}
		if best[1]-best[0] >= MinFragment {
			if len(spans) > 0 && best[0] <= spans[len(spans)-1][1] {
				spans[len(spans)-1][1] = max(spans[len(spans)-1][1], best[1])
			} else {
				spans = append(spans, best)
			}
		}
	}
	if spans == nil {
		return text
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(text[last:sp[0]])
		b.WriteString(Redacted)
		last = sp[1]
	}
	b.WriteString(text[last:])
	return b.String()
}

// JSON returns doc without secrets. A valid JSON document stays valid: when
// there is anything to remove, every string in it (keys included) is
// scrubbed and the document encoded again (object keys sorted, numbers as
// they were, HTML characters not escaped). A document that is not JSON is
// scrubbed as text.
func (s *Scrubber) JSON(doc []byte) []byte {
	if len(doc) == 0 || s.String(string(doc)) == string(doc) {
		return doc
	}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []byte(s.String(string(doc)))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.value(v)); err != nil {
		return []byte(s.String(string(doc)))
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

func (s *Scrubber) value(v any) any {
	switch v := v.(type) {
	case string:
		return s.String(v)
	case []any:
		for i := range v {
			v[i] = s.value(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[s.String(k)] = s.value(e)
		}
		return out
	}
	return v
}

// Tail scrubs the end of a longer text — a process's last output — and
// cuts it to at most max bytes (plus the marks of the cut and of what was
// removed). A cut, here or wherever the text was cut before, can split a
// known value, so a piece of one of MinValue bytes or more at either edge
// is removed too.
func (s *Scrubber) Tail(text string, max int) string {
	text = s.String(text)
	if len(text) > max {
		text = "…" + text[len(text)-max:]
	}
	if s != nil {
		for _, v := range s.values {
			for k := len(v) - 1; k >= MinValue; k-- {
				if i := strings.Index(text, v[len(v)-k:]); i >= 0 && i <= len("…") {
					text = text[:i] + Redacted + text[i+k:]
					break
				}
			}
			for k := len(v) - 1; k >= MinValue; k-- {
				if strings.HasSuffix(text, v[:k]) {
					text = text[:len(text)-k] + Redacted
					break
				}
			}
		}
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "?")
	}
	return text
}

// Set is the growing set of known values: the credentials the orchestrator
// resolved. It is safe for concurrent use; the zero value is empty, and a
// nil *Set holds nothing.
type Set struct {
	mu  sync.Mutex // serializes Add
	cur atomic.Pointer[Scrubber]
}

// Add adds values (those shorter than MinValue are ignored).
func (k *Set) Add(values ...string) {
	if k == nil {
		return
	}
	if cur := k.cur.Load(); cur != nil && !slices.ContainsFunc(values, func(v string) bool {
		return accepted(v) && !slices.Contains(cur.values, v)
	}) {
		return // the common case: nothing new, no lock
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cur.Store(k.cur.Load().With(values...))
}

// Scrubber returns a Scrubber of the values added so far.
func (k *Set) Scrubber() *Scrubber {
	if k == nil {
		return nil
	}
	return k.cur.Load()
}
