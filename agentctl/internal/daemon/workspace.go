package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/checkout"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// A session's workspace is WorkspacesDir/<session id>: one checkout per
// task repository, on the session's own branch, made from the host's one
// mirror of that repository (internal/checkout, ADR 0038). It outlives
// the session, which never loses work: a stop takes it back from the
// agent's uid (a later session may get that uid), a relaunch of the same
// session hands it to its new agent.

// repo is a checkout of a session, as launched, without its credential,
// and what became of it (err empty: it is in the workspace).
type repo struct {
	key, url, branch, dir string
	err                   string
	// work is the checkout's work when last measured (measureWork).
	work *agentctlv1.CheckoutWork
}

// checkouts validates the checkouts of a launch or a push (named by
// field): keys and paths unique, each path one segment of the workspace.
func checkouts(field string, in []*agentctlv1.Checkout) ([]repo, error) {
	out := make([]repo, 0, len(in))
	keys, paths := map[string]bool{}, map[string]bool{}
	for i, c := range in {
		field := fmt.Sprintf("%s[%d]", field, i)
		p := c.GetPath()
		switch {
		case c.GetKey() == "":
			return nil, errdefs.RequiredField(field + ".key")
		case c.GetUrl() == "":
			return nil, errdefs.RequiredField(field + ".url")
		case c.GetBranch() == "":
			return nil, errdefs.RequiredField(field + ".branch")
		case p == "" || p == "." || p == ".." || strings.ContainsAny(p, `/\`) || strings.HasPrefix(p, "."):
			return nil, errdefs.InvalidField(field+".path", "%q is not one visible path segment", p)
		case keys[c.GetKey()]:
			return nil, errdefs.InvalidField(field+".key", "%q is checked out twice", c.GetKey())
		case paths[p]:
			return nil, errdefs.InvalidField(field+".path", "%q holds two checkouts", p)
		}
		keys[c.GetKey()], paths[p] = true, true
		out = append(out, repo{key: c.GetKey(), url: c.GetUrl(), branch: c.GetBranch(), dir: p})
	}
	return out, nil
}

// owner is the checkouts' owner: the agent's uid, or nil for agentctl's.
func (s *session) owner() *checkout.Owner {
	if s.uid == noUID {
		return nil
	}
	return &checkout.Owner{UID: s.uid, GID: s.uid}
}

// pending is a checkout's error while it is being made: the session
// neither shows it nor its tools yet.
const pending = "being checked out"

// addCheckouts makes the checkouts of a push that the session's
// workspace lacks (by key), as a launch makes its own, before the push's
// provider set is applied; the ones it has are kept as they are.
func (d *Daemon) addCheckouts(ctx context.Context, s *session, in []*agentctlv1.Checkout) error {
	given, err := checkouts("surface.checkouts", in)
	if err != nil {
		return err
	}
	s.mu.Lock()
	keys, paths := map[string]bool{}, map[string]bool{}
	for _, r := range s.repos {
		keys[r.key], paths[r.dir] = true, true
	}
	from := len(s.repos)
	var fresh []*agentctlv1.Checkout
	for i, r := range given {
		switch {
		case keys[r.key]:
			continue
		case paths[r.dir]:
			s.mu.Unlock()
			return errdefs.InvalidField(fmt.Sprintf("surface.checkouts[%d].path", i), "%q holds another checkout of the session", r.dir)
		}
		r.err = pending
		s.repos = append(s.repos, r)
		fresh = append(fresh, in[i])
	}
	s.mu.Unlock()
	d.materialize(ctx, s, from, fresh)
	return nil
}

// materialize fetches each checkout's mirror and makes the session's
// checkout of it (s.repos[from+i] of in[i]), or hands a kept one to the
// session's uid. A checkout is made whole or not at all; one that cannot
// be made is recorded in s.repos (the status says why) and the session
// goes on without it.
func (d *Daemon) materialize(ctx context.Context, s *session, from int, in []*agentctlv1.Checkout) {
	if len(in) == 0 {
		return
	}
	set := func(i int, err error) {
		s.mu.Lock() // the status reads it meanwhile
		defer s.mu.Unlock()
		if err == nil {
			s.repos[from+i].err = ""
			return
		}
		s.repos[from+i].err = err.Error()
		d.log.Warn("checkout not made", "session_id", s.id, "repository", s.repos[from+i].key, "error", err)
	}
	if err := d.prepareWorkspace(s); err != nil {
		for i := range in {
			set(i, err)
		}
		return
	}
	owner := s.owner()
	for i, c := range in {
		s.mu.Lock()
		r := s.repos[from+i] // its fields but err and work are fixed when given
		s.mu.Unlock()
		set(i, d.checkout(ctx, r, filepath.Join(s.workspace, r.dir), c, owner))
	}
}

// prepareWorkspace creates the session's workspace directory, the
// agent's, under a directory it may traverse but not list, and refuses a
// workspace the agent's uid could not reach.
func (d *Daemon) prepareWorkspace(s *session) error {
	if err := os.MkdirAll(d.opts.WorkspacesDir, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(d.opts.WorkspacesDir, 0o711); err != nil {
		return err
	}
	if s.uid != noUID {
		if err := agentuid.Reaches(uint32(s.uid), d.opts.WorkspacesDir, agentuid.Enter); err != nil {
			return fmt.Errorf("the agent cannot reach the workspaces directory %s: %v "+
				"(give it a workspaces directory whose parents others may traverse, mode o+x: toolscope serve --workspaces-dir, agentctl serve --workspaces-dir)", d.opts.WorkspacesDir, err)
		}
	}
	if err := os.Mkdir(s.workspace, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	return s.own(s.workspace)
}

// checkout makes (or takes over) one checkout.
func (d *Daemon) checkout(ctx context.Context, r repo, dir string, c *agentctlv1.Checkout, owner *checkout.Owner) error {
	mirrors, err := d.mirrors()
	if err != nil {
		return fmt.Errorf("the repositories' mirrors: %w", err)
	}
	if _, err := os.Lstat(dir); err != nil { // a kept checkout takes no room
		if err := d.diskRoom(); err != nil {
			return err
		}
	}
	m, err := mirrors.Fetch(ctx, r.key, checkout.Remote{URL: r.url, User: c.GetFetchCredential().GetUsername(), Token: c.GetFetchCredential().GetToken()})
	if err != nil {
		return err
	}
	err = checkout.Create(ctx, m, dir, checkout.Options{Branch: r.branch, Base: c.GetBase(), Origin: r.url, Owner: owner})
	if errors.Is(err, checkout.ErrExists) {
		if owner != nil {
			if err := checkout.HandOver(dir, *owner); err != nil {
				return fmt.Errorf("hand the kept checkout %s to uid %d: %w", dir, owner.UID, err)
			}
		}
		d.log.Info("checkout kept from an earlier run", "repository", r.key, "dir", dir)
		return nil
	}
	if err == nil {
		d.log.Info("checkout made", "repository", r.key, "branch", r.branch, "dir", dir)
	}
	return err
}

// takeBack makes a stopped session's workspace agentctl's alone: the uid
// its agent had serves later sessions, which must not reach it.
func (d *Daemon) takeBack(s *session) {
	if err := os.Lchown(s.workspace, os.Geteuid(), os.Getegid()); err != nil && !os.IsNotExist(err) {
		d.log.Warn("taking back a stopped session's workspace", "session_id", s.id, "dir", s.workspace, "error", err)
	}
}

// Deliver pushes the session's own branch of one of its checkouts.
func (d *Daemon) Deliver(ctx context.Context, req *agentctlv1.DeliverRequest) (*agentctlv1.DeliverResponse, error) {
	if req.GetKey() == "" {
		return nil, errdefs.RequiredField("key")
	}
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	var r *repo
	s.mu.Lock()
	for i := range s.repos {
		if s.repos[i].key == req.GetKey() {
			found := s.repos[i]
			r = &found
		}
	}
	s.mu.Unlock()
	if r == nil || r.err != "" {
		// Not NotFound: that says the session is not hosted here.
		return nil, errdefs.InvalidField("key", "session %q has no checkout of %q", s.id, req.GetKey())
	}
	cred := req.GetCredential()
	mirrors, err := d.mirrors()
	if err != nil {
		return nil, fmt.Errorf("the repositories' mirrors: %w", err)
	}
	out, err := mirrors.Deliver(ctx, r.key, checkout.Remote{URL: r.url, User: cred.GetUsername(), Token: cred.GetToken()},
		filepath.Join(s.workspace, r.dir), r.branch, s.owner())
	if err != nil {
		return nil, fmt.Errorf("deliver branch %q of %s: %w", r.branch, r.key, err)
	}
	d.log.Info("branch delivered", "session_id", s.id, "repository", r.key, "ref", out.Ref, "commit", out.Commit, "up_to_date", out.UpToDate)
	return &agentctlv1.DeliverResponse{Ref: out.Ref, Commit: out.Commit, UpToDate: out.UpToDate}, nil
}

// workTimeout bounds a measure of a session's work (a git status and a
// rev-list per checkout, seconds on a large one): a checkout not measured
// within it is reported unknown, never clean.
const workTimeout = 30 * time.Second

// measureWork measures the work of each checkout in the session's
// workspace (checkout.Mirrors.Work), as the agent's uid, and keeps it for
// the status. Whatever a checkout's configuration makes git run runs
// under the agent's uid: the caller measures while that uid is the
// session's, and a stop ends what runs under it after.
func (d *Daemon) measureWork(ctx context.Context, s *session) {
	ctx, cancel := context.WithTimeout(ctx, workTimeout)
	defer cancel()
	s.mu.Lock()
	repos := slices.Clone(s.repos)
	s.mu.Unlock()
	owner := s.owner()
	for i, r := range repos {
		if r.err != "" {
			continue
		}
		w := &agentctlv1.CheckoutWork{}
		mirrors, err := d.mirrors() // opened once, at a session's first checkout
		var got checkout.Work
		if err == nil {
			got, err = mirrors.Work(ctx, r.key, filepath.Join(s.workspace, r.dir), r.branch, owner)
		}
		if err != nil {
			w.Error = err.Error()
			d.log.Warn("checkout's work not measured", "session_id", s.id, "repository", r.key, "error", err)
		} else {
			w.Head, w.Uncommitted, w.Unpushed = got.Head, uint32(min(got.Uncommitted, math.MaxUint32)), uint32(min(got.Unpushed, math.MaxUint32))
		}
		s.mu.Lock()
		s.repos[i].work = w
		s.mu.Unlock()
	}
}

// checkoutStates is the status of the session's checkouts. s.mu is held.
func (s *session) checkoutStates() []*agentctlv1.CheckoutState {
	var out []*agentctlv1.CheckoutState
	for _, r := range s.repos {
		out = append(out, &agentctlv1.CheckoutState{Key: r.key, Path: r.dir, Branch: r.branch, Error: r.err, Work: r.work})
	}
	return out
}

// hasCheckout reports whether the workspace holds a checkout, so that
// the session shows the tools that act on one. s.mu is held.
func (s *session) hasCheckout() bool {
	for _, r := range s.repos {
		if r.err == "" {
			return true
		}
	}
	return false
}

// workdirLocked is the workspace, if it holds a checkout: the agent's
// working directory unless its launch names one. s.mu is held.
func (s *session) workdirLocked() string {
	if s.hasCheckout() {
		return s.workspace
	}
	return ""
}

// diskRoom refuses a checkout once the host's workspaces and mirrors use
// their bound (Options.WorkspacesMaxBytes), and records their use. One
// fetch may go past the bound; the next checkout is refused.
func (d *Daemon) diskRoom() error {
	used, err := diskUse(d.opts.WorkspacesDir, d.opts.MirrorsDir)
	if err != nil {
		return fmt.Errorf("measure the workspaces' disk use: %w", err)
	}
	d.metrics.workspacesMeasured(used)
	if bound := d.opts.WorkspacesMaxBytes; bound > 0 && used >= bound {
		return fmt.Errorf("%w: the workspaces and mirrors on this host use %s of their %s bound "+
			"(agentctl serve --workspaces-max-bytes, toolscope serve --workspaces-max-bytes): remove stopped sessions' workspaces "+
			"(toolscope session clean) or raise the bound", errdefs.ErrResourceExhausted, mib(used), mib(bound))
	}
	return nil
}

// diskUse is the disk the files under dirs take (allocated blocks), a
// file with several links once; a directory that does not exist takes
// none.
func diskUse(dirs ...string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			info, err := e.Info()
			if err != nil {
				return nil // gone meanwhile
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			if st.Nlink > 1 && !e.IsDir() {
				k := inode{uint64(st.Dev), st.Ino}
				if seen[k] {
					return nil
				}
				seen[k] = true
			}
			total += st.Blocks * 512
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// mib formats a size in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
