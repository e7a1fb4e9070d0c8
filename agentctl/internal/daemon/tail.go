package daemon

import (
	"bytes"
	"io"
	"os"
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
	return string(bytes.ToValidUTF8(buf, []byte("\uFFFD")))
}
