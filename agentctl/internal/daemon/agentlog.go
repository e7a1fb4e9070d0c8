package daemon

import (
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Defaults of the bounds on agents' logs (Options; agentctl serve flags
// of the same names).
const (
	// DefaultExitTailLines and DefaultExitTailBytes bound the agent output
	// an agent_exited event carries (--exit-tail-lines, --exit-tail-bytes).
	DefaultExitTailLines = 20
	DefaultExitTailBytes = 4 << 10
	// DefaultLogBacklog is what ReadAgentLog sends of the log before it
	// follows it (--log-backlog).
	DefaultLogBacklog = 1 << 20
	// DefaultAgentLogMax bounds a running agent's log (--agent-log-max-bytes):
	// agent.log is rotated to agent.log.1 at half of it, so the two hold
	// at most this much, and at least its second half of the latest output.
	DefaultAgentLogMax = 64 << 20
)

// rotated is the previous part of a rotated log.
func rotated(path string) string { return path + ".1" }

// rotatingLog is an agent's log, written by agentctl from the agent's
// output pipe: at half its bound, agent.log is renamed to agent.log.1
// (replacing the previous one) and a new agent.log started.
type rotatingLog struct {
	path string
	half int64
	own  func(path string) error // gives a new file to the agent's uid

	mu   sync.Mutex
	f    *os.File
	size int64
}

func openRotatingLog(path string, limit int64, own func(string) error) (*rotatingLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := own(path); err != nil {
		_ = f.Close()
		return nil, err
	}
	w := &rotatingLog{path: path, half: max(limit/2, 1), own: own, f: f}
	if info, err := f.Stat(); err == nil {
		w.size = info.Size()
	}
	return w, nil
}

// Write implements io.Writer.
func (w *rotatingLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size > 0 && w.size+int64(len(b)) > w.half {
		if err := w.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := w.f.Write(b)
	w.size += int64(n)
	return n, err
}

func (w *rotatingLog) rotate() error {
	if err := w.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(w.path, rotated(w.path)); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w.f, w.size = f, 0
	return w.own(w.path)
}

// Close closes the current file.
func (w *rotatingLog) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}

// lastBytes returns the last n bytes written to the log at path, across
// its rotated part; nil if there is none.
func lastBytes(path string, n int64) []byte {
	cur := readTail(path, n)
	if int64(len(cur)) < n {
		return append(readTail(rotated(path), n-int64(len(cur))), cur...)
	}
	return cur
}

func readTail(path string, n int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(info.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, info.Size()-off))
	return b
}

// OpenLogFile opens agentctl's own log file (agentctl serve --log-file),
// bounded as an agent's log is: rotated to PATH.1 at half of limit. Its
// directory is made if missing.
func OpenLogFile(path string, limit int64) (io.WriteCloser, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return openRotatingLog(path, limit, func(string) error { return nil })
}
