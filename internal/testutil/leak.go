package testutil

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"sort"
)

// LeakFragmentLen is the length of the pieces of a secret a LeakScanner
// looks for.
const LeakFragmentLen = 12

// LeakScanner looks for secrets in raw bytes: each secret whole, its
// base64 forms, and every piece of LeakFragmentLen bytes, so a truncated,
// wrapped or partly masked secret is found too.
type LeakScanner struct {
	needles []leakNeedle
}

type leakNeedle struct {
	label string
	b     []byte
}

// NewLeakScanner scans for secrets, by label.
func NewLeakScanner(secrets map[string]string) *LeakScanner {
	s := &LeakScanner{}
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := secrets[name]
		s.needles = append(s.needles,
			leakNeedle{name, []byte(v)},
			leakNeedle{name + " (base64)", []byte(base64.StdEncoding.EncodeToString([]byte(v)))},
			leakNeedle{name + " (base64url)", []byte(base64.RawURLEncoding.EncodeToString([]byte(v)))})
		for i := 0; i+LeakFragmentLen <= len(v); i++ {
			s.needles = append(s.needles, leakNeedle{fmt.Sprintf("%s (bytes %d-%d)", name, i, i+LeakFragmentLen), []byte(v[i : i+LeakFragmentLen])})
		}
	}
	return s
}

// Needles is how many byte strings the scanner looks for.
func (s *LeakScanner) Needles() int { return len(s.needles) }

// Find returns the label of every needle in data.
func (s *LeakScanner) Find(data []byte) []string {
	var hits []string
	for _, n := range s.needles {
		if bytes.Contains(data, n.b) {
			hits = append(hits, n.label)
		}
	}
	return hits
}
