package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// noUID marks a session whose agent runs under agentctl's own uid.
const noUID = -1

// allocUIDLocked returns a free uid of the range for a new session, or
// noUID without a range. d.mu is held.
func (d *Daemon) allocUIDLocked() (int, error) {
	r := d.opts.AgentUIDs
	if !r.Set() {
		return noUID, nil
	}
	used := make(map[int]bool, len(d.sessions))
	for _, s := range d.sessions {
		if s.uid != noUID {
			used[s.uid] = true
		}
	}
	for u := int(r.First); u <= int(r.Last); u++ {
		if !used[u] {
			return u, nil
		}
	}
	return noUID, fmt.Errorf("every uid of --agent-uids %s is in use by a live session; widen the range or stop a session: %w",
		r, errdefs.ErrResourceExhausted)
}

// checkSharedUIDLocked refuses a session of a second workspace when its
// agent would share a uid with another workspace's agents: they could read
// each other's MCP tokens. d.mu is held.
func (d *Daemon) checkSharedUIDLocked(workspace string) error {
	if d.opts.AgentUIDs.Set() || d.opts.AllowSharedUID {
		return nil
	}
	for _, s := range d.sessions {
		if s.workspaceID != workspace {
			return errdefs.FailedPrecondition("this agentctl hosts a session of workspace %q and runs every agent under its own uid, "+
				"so an agent of workspace %q could read that session's MCP token; start agentctl with --agent-uids FIRST-LAST "+
				"(as root) to give each session a uid of its own, or with --allow-shared-uid to accept the risk", s.workspaceID, workspace)
		}
	}
	return nil
}

// prepareDir creates the session's directory: owned by the session's uid
// (and readable by it alone), under a parent others may traverse but not
// list. Without a uid it is agentctl's, mode 0700.
func (s *session) prepareDir() error {
	parent := filepath.Dir(s.dir)
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return err
	}
	if s.uid != noUID {
		// The agent walks through it to its own directory, and lists none.
		if err := os.Chmod(parent, 0o711); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return err
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return err
	}
	return s.own(s.dir)
}

// own gives path to the session's uid, if it has one.
func (s *session) own(path string) error {
	if s.uid == noUID {
		return nil
	}
	return os.Lchown(path, s.uid, s.uid)
}

// credential is the process credential of the session's agent: its uid
// and group, no supplementary groups. Nil runs it as agentctl.
func (s *session) credential() *syscall.Credential {
	if s.uid == noUID {
		return nil
	}
	return &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid), Groups: []uint32{}}
}

// mkdirAll creates dir and its missing parents inside the session's
// directory, owned by the session's uid.
func (s *session) mkdirAll(dir string) error {
	rel, err := filepath.Rel(s.dir, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is outside the session's directory", dir)
	}
	path := s.dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." || part == "" {
			continue
		}
		path = filepath.Join(path, part)
		if err := os.Mkdir(path, 0o700); err != nil && !os.IsExist(err) {
			return err
		}
		if err := s.own(path); err != nil {
			return err
		}
	}
	return nil
}
