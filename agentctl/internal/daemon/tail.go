package daemon

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
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

// Bounds of ReadAgentLog: what it sends of the log before following it,
// the size of each message, and how often a follower looks for more.
const (
	agentLogBacklog = 1 << 20
	agentLogChunk   = 32 << 10
	agentLogPoll    = 100 * time.Millisecond
)

// ReadAgentLog implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) ReadAgentLog(req *agentctlv1.ReadAgentLogRequest, stream grpc.ServerStreamingServer[agentctlv1.ReadAgentLogResponse]) error {
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return err
	}
	s.mu.Lock()
	done := s.agentDone
	s.mu.Unlock()
	if done == nil {
		return errdefs.FailedPrecondition("session %q runs no agent: it has no agent log", s.id)
	}
	f, err := os.Open(filepath.Join(s.dir, "agent.log"))
	if err != nil {
		return err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > agentLogBacklog {
		if _, err := f.Seek(info.Size()-agentLogBacklog, io.SeekStart); err != nil {
			return err
		}
	}
	ctx := stream.Context()
	tick := time.NewTicker(agentLogPoll)
	defer tick.Stop()
	buf := make([]byte, agentLogChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if err := stream.Send(&agentctlv1.ReadAgentLogResponse{Data: buf[:n]}); err != nil {
				return err
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		// At the end of what is written.
		if !req.GetFollow() {
			return nil
		}
		select {
		case <-done:
			// The agent exited: what it wrote is all there is; one more
			// read takes what came after the last one.
			if n, _ := f.Read(buf); n > 0 {
				if err := stream.Send(&agentctlv1.ReadAgentLogResponse{Data: buf[:n]}); err != nil {
					return err
				}
				continue
			}
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if s.stopped() {
			return nil
		}
	}
}
