package daemon

import (
	"bytes"
	"io"
	"os"
	"unicode/utf8"
)

// The bounds of the agent output an agent_exited event carries.
const (
	agentTailLines = 20
	agentTailBytes = 4 << 10
)

// tail returns the last lines of a file, at most maxLines lines and
// maxBytes bytes (a line cut by the byte bound loses its start). It
// returns "" for a file it cannot read: the event goes out without it.
func tail(path string, maxLines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(info.Size()-int64(maxBytes), 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, off, info.Size()-off))
	if err != nil {
		return ""
	}
	buf = bytes.TrimRight(buf, "\n")
	for i, n := len(buf)-1, 0; i >= 0; i-- {
		if buf[i] == '\n' {
			if n++; n == maxLines {
				buf = buf[i+1:]
				break
			}
		}
	}
	// Valid UTF-8 (protobuf strings must be), and still within maxBytes
	// after invalid bytes are replaced: trimmed from the front at a rune
	// start.
	buf = bytes.ToValidUTF8(buf, []byte("\uFFFD"))
	for len(buf) > 0 && (len(buf) > maxBytes || !utf8.RuneStart(buf[0])) {
		buf = buf[1:]
	}
	return string(buf)
}
