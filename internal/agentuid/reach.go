package agentuid

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Access is what an agent must be able to do with a path.
type Access int

// Accesses.
const (
	Read  Access = iota // open a file for reading
	Run                 // execute a program
	Enter               // enter (search) a directory
)

// Reaches reports whether uid, with its own group (gid = uid) and no
// supplementary groups — the credential agents run under — can walk to
// path and read, run or enter it, from the permission bits of path and each
// directory above it (symbolic links resolved first; ACLs are not read,
// so a path an ACL opens is reported unreachable). The error names the
// first component that stops it, with its owner and mode. uid 0 reaches
// everything that exists.
func Reaches(uid uint32, path string, want Access) error {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	resolved, err = filepath.Abs(resolved)
	if err != nil {
		return err
	}
	dir := "/"
	parts := strings.Split(strings.TrimPrefix(resolved, "/"), "/")
	for i, part := range parts {
		if err := permits(uid, dir, 0o1, "enter"); err != nil {
			return err
		}
		dir = filepath.Join(dir, part)
		if i == len(parts)-1 {
			switch want {
			case Run:
				return permits(uid, dir, 0o1, "run")
			case Enter:
				return permits(uid, dir, 0o1, "enter")
			default:
				return permits(uid, dir, 0o4, "read")
			}
		}
	}
	return nil
}

// permits checks bit (0o4 read, 0o1 execute/search) of path for uid.
func permits(uid uint32, path string, bit os.FileMode, verb string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // not a POSIX file system: left to the kernel
	}
	mode := fi.Mode().Perm()
	var granted bool
	switch {
	case uid == 0:
		granted = bit != 0o1 || fi.IsDir() || mode&0o111 != 0 // root runs a file only if someone may
	case st.Uid == uid:
		granted = mode&(bit<<6) != 0
	case st.Gid == uid:
		granted = mode&(bit<<3) != 0
	default:
		granted = mode&bit != 0
	}
	if !granted {
		return fmt.Errorf("uid %d may not %s %s (owner %d:%d, mode %04o)", uid, verb, path, st.Uid, st.Gid, mode)
	}
	return nil
}
