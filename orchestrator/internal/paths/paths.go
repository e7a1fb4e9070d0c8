// Package paths says where toolscope's files are: the orchestrator's data
// directory and socket, and the binaries installed next to toolscope. The
// server and the CLI both need them, and the CLI links nothing of the
// server (ADR 0035), so they live here, apart from both.
package paths

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// SocketName is the orchestrator's Unix socket, in its data directory.
const SocketName = "toolscope.sock"

// Socket returns the socket of the orchestrator whose data directory is
// dataDir.
func Socket(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// DefaultDataDir returns $TOOLSCOPE_DATA_DIR, else $XDG_DATA_HOME/toolscope,
// else ~/.local/share/toolscope.
func DefaultDataDir() (string, error) {
	if d := os.Getenv("TOOLSCOPE_DATA_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "toolscope"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find a data dir (set --data-dir or TOOLSCOPE_DATA_DIR): %w", err)
	}
	return filepath.Join(home, ".local", "share", "toolscope"), nil
}

// Companion returns the binary name installed with the running one: next
// to the running executable (symbolic links followed), else on PATH. ok is
// false when there is none; the caller says what to do about it.
func Companion(name string) (path string, ok bool) {
	if self, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		candidate := filepath.Join(filepath.Dir(self), name)
		if info, err := os.Stat(candidate); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return candidate, true
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}
