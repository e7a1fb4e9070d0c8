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

// Process is one entry of /proc.
type Process struct {
	PID, PPID int
	State     byte   // as State returns it
	Args      string // the command line, its arguments joined by spaces
}

// List returns the processes of /proc. One that exits while it is read
// is left out.
func List() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var ps []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) S ppid ...": read after the last ')', as State does.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(string(fields[1]))
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := string(bytes.TrimSpace(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		ps = append(ps, Process{PID: pid, PPID: ppid, State: fields[0][0], Args: args})
	}
	return ps, nil
}
