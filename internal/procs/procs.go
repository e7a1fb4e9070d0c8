// Package procs answers questions about processes that are not this
// process's children, from /proc: whether one is alive, and whether a pid
// is still the process it was.
package procs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Alive reports whether the process pid runs. A zombie — a process that
// ended and that its parent has not reaped yet (an orphan whose init reaps
// slowly) — is not alive: signal 0 succeeds on it, so that test alone is
// fooled. Without /proc it falls back to signal 0.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	state, err := State(pid)
	switch {
	case err == nil:
		return state != 'Z' && state != 'X' && state != 'x'
	case errors.Is(err, os.ErrNotExist) && procMounted():
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// State returns the state letter of /proc/PID/stat (R, S, D, T, Z, ...).
func State(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses; the state
	// follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, errors.New("procs: malformed /proc/" + strconv.Itoa(pid) + "/stat")
	}
	return b[i+2], nil
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
