package daemon

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// tail returns the last lines of a log (with its rotated part), at most
// maxLines lines and maxBytes bytes (a line cut by the byte bound loses
// its start). It returns "" for a log it cannot read: the event goes out
// without it.
func tail(path string, maxLines, maxBytes int) string {
	buf := bytes.TrimRight(lastBytes(path, int64(maxBytes)), "\n")
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

// Bounds of ReadAgentLog: the size of each message, and how often a
// follower looks for more (what it sends before following is
// Options.LogBacklog).
const (
	agentLogChunk = 32 << 10
	agentLogPoll  = 100 * time.Millisecond
)

// ReadAgentLog implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) ReadAgentLog(req *agentctlv1.ReadAgentLogRequest, stream grpc.ServerStreamingServer[agentctlv1.ReadAgentLogResponse]) error {
	s, err := d.lookup(req.GetSessionId())
	if errors.Is(err, errdefs.ErrNotFound) && !strings.ContainsAny(req.GetSessionId(), `/\`) {
		// A stopped session is forgotten; its log was kept in LogsDir.
		if b := lastBytes(filepath.Join(d.opts.LogsDir, req.GetSessionId(), "agent.log"), d.opts.LogBacklog); b != nil {
			return stream.Send(&agentctlv1.ReadAgentLogResponse{Data: b})
		}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	done := s.agentDone
	s.mu.Unlock()
	if done == nil {
		return errdefs.FailedPrecondition("session %q runs no agent: it has no agent log", s.id)
	}
	path := filepath.Join(s.dir, "agent.log")
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	backlog := d.opts.LogBacklog
	if info, err := f.Stat(); err == nil && info.Size() > backlog {
		if _, err := f.Seek(info.Size()-backlog, io.SeekStart); err != nil {
			return err
		}
	} else if err == nil {
		// The rest of the backlog from the rotated part, if any.
		if b := readTail(rotated(path), backlog-info.Size()); len(b) > 0 {
			if err := stream.Send(&agentctlv1.ReadAgentLogResponse{Data: b}); err != nil {
				return err
			}
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
		// At the end of what is written to f.
		if next := reopened(f, path); next != nil {
			// Rotated: f, now agent.log.1, is complete; go on with the
			// new agent.log from its start.
			_ = f.Close()
			f = next
			continue
		}
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

// reopened returns path opened anew if it is no longer the file f reads
// (the log was rotated), else nil.
func reopened(f *os.File, path string) *os.File {
	cur, err1 := f.Stat()
	now, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || os.SameFile(cur, now) {
		return nil
	}
	next, err := os.Open(path)
	if err != nil {
		return nil
	}
	return next
}

// ReadAgentctlLog implements agentctlv1.AgentctlServiceServer: the lines
// of agentctl's log file (Options.LogFile) that name the session, from
// the last LogBacklog bytes of the file (with its rotated part), then,
// with follow, as they are written, until the session is no longer
// hosted. The session may have stopped long ago: its lines stay.
func (d *Daemon) ReadAgentctlLog(req *agentctlv1.ReadAgentctlLogRequest, stream grpc.ServerStreamingServer[agentctlv1.ReadAgentctlLogResponse]) error {
	id := req.GetSessionId()
	if id == "" {
		return errdefs.RequiredField("session_id")
	}
	if d.opts.LogFile == "" {
		return errdefs.FailedPrecondition("this agentctl keeps no log file (agentctl serve --log-file): its log is its host's")
	}
	f, err := os.Open(d.opts.LogFile)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	backlog := d.opts.LogBacklog
	var pending []byte
	if info, err := f.Stat(); err == nil && info.Size() > backlog {
		if _, err := f.Seek(info.Size()-backlog, io.SeekStart); err != nil {
			return err
		}
	} else if err == nil {
		pending = readTail(rotated(d.opts.LogFile), backlog-info.Size())
	}
	// Lines naming the session: "session_id=ID" then a space or the end.
	mark := []byte("session_id=" + id)
	send := func(all bool) error {
		var out []byte
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			line := pending[:i+1]
			pending = pending[i+1:]
			if j := bytes.Index(line, mark); j >= 0 {
				if rest := line[j+len(mark):]; rest[0] == ' ' || rest[0] == '\n' {
					out = append(out, line...)
				}
			}
		}
		if all {
			pending = pending[:0]
		}
		if len(out) == 0 {
			return nil
		}
		return stream.Send(&agentctlv1.ReadAgentctlLogResponse{Data: out})
	}
	ctx := stream.Context()
	tick := time.NewTicker(agentLogPoll)
	defer tick.Stop()
	buf := make([]byte, agentLogChunk)
	ended := false // the session was seen gone: one more read takes its last lines
	for {
		n, err := f.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			if err := send(false); err != nil {
				return err
			}
			if len(pending) > agentLogChunk { // a line that long is cut
				pending = pending[:0]
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if next := reopened(f, d.opts.LogFile); next != nil {
			_ = f.Close()
			f = next
			continue
		}
		if !req.GetFollow() || ended {
			return send(true)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		_, err = d.lookup(id)
		ended = err != nil
	}
}
