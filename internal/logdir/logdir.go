// Package logdir bounds a directory of per-session log directories
// (LOGS/<session>/...), kept after their sessions stop: the orchestrator's
// <data-dir>/logs and a remote agentctl's logs directory.
package logdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Bound limits a logs directory. A zero field is no bound.
type Bound struct {
	// MaxBytes bounds the total size of the stopped sessions' logs: the
	// oldest are removed first until the rest fit.
	MaxBytes int64
	// MaxAge removes a stopped session's logs once nothing was written to
	// them for this long.
	MaxAge time.Duration
}

// Defaults of Bound.
const (
	DefaultMaxBytes = 1 << 30 // 1 GiB
	DefaultMaxAge   = 30 * 24 * time.Hour
)

// Set reports whether b bounds anything.
func (b Bound) Set() bool { return b.MaxBytes > 0 || b.MaxAge > 0 }

type entry struct {
	name  string
	size  int64
	mtime time.Time
}

// Prune removes the log directories under dir of sessions for which live
// returns false, beyond b: first those older than MaxAge, then the oldest
// (by their newest file's modification time) until the stopped sessions' logs fit in MaxBytes.
// A live session's logs are never removed, nor counted. It returns the
// sessions whose logs it removed.
func Prune(dir string, b Bound, now time.Time, live func(session string) bool) ([]string, error) {
	if !b.Set() {
		return nil, nil
	}
	list, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var stopped []entry
	var total int64
	for _, d := range list {
		if !d.IsDir() || live(d.Name()) {
			continue
		}
		e := entry{name: d.Name()}
		_ = filepath.WalkDir(filepath.Join(dir, d.Name()), func(_ string, f fs.DirEntry, err error) error {
			if err != nil || f.IsDir() {
				return nil
			}
			if info, err := f.Info(); err == nil {
				e.size += info.Size()
				if info.ModTime().After(e.mtime) {
					e.mtime = info.ModTime()
				}
			}
			return nil
		})
		if e.mtime.IsZero() { // no file: the directory's own time
			if info, err := d.Info(); err == nil {
				e.mtime = info.ModTime()
			}
		}
		stopped = append(stopped, e)
		total += e.size
	}
	slices.SortFunc(stopped, func(a, b entry) int { return a.mtime.Compare(b.mtime) })
	var removed []string
	var errs error
	for _, e := range stopped {
		old := b.MaxAge > 0 && now.Sub(e.mtime) > b.MaxAge
		over := b.MaxBytes > 0 && total > b.MaxBytes
		if !old && !over {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.name)); err != nil {
			if errs == nil {
				errs = err
			}
			continue
		}
		total -= e.size
		removed = append(removed, e.name)
	}
	return removed, errs
}
