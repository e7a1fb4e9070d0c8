// Package pgtest runs a throw-away PostgreSQL cluster for tests: initdb in
// a temporary directory, the server on a Unix socket only (no TCP port),
// run as the invoking user or, under root (which initdb refuses), as the
// Debian "postgres" user. Stop ends the server and removes the directory,
// so testutil.LeaveNothing finds nothing left.
//
// The binaries are found in $TOOLSCOPE_PG_BIN or the newest
// /usr/lib/postgresql/*/bin; .ci/run installs Debian's postgresql package.
// A test that needs them calls Shared, which skips (fails under CI) when
// they are missing.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/toolscope/toolscope/internal/testutil"
)

// EnvBin names the directory of initdb and postgres, overriding the search.
const EnvBin = "TOOLSCOPE_PG_BIN"

// StartTimeout bounds initdb plus the server's start.
const StartTimeout = 5 * time.Minute // only a hang: initdb was killed at 60 s on a 2-core machine at load 40

// Cluster is a running throw-away PostgreSQL server.
type Cluster struct {
	dir    string // removed by Stop
	socket string // the socket directory
	cmd    *exec.Cmd
	exited chan struct{}
	dbs    atomic.Int64
}

var (
	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
)

// Shared returns the package's one cluster, started on first use; call
// StopShared from TestMain (testutil.LeaveNothing's cleanup). It skips t
// (fails it under CI) when the PostgreSQL binaries are missing.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		testutil.SkipOrFailUnderCI(t, "PostgreSQL: %v (install Debian's postgresql package, or set %s)", err, EnvBin)
	}
	sharedOnce.Do(func() { shared, sharedErr = Start(bin) })
	if sharedErr != nil {
		t.Fatalf("start PostgreSQL: %v", sharedErr)
	}
	return shared
}

// StopShared stops the shared cluster if one was started.
func StopShared() {
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
}

// BinDir returns the directory holding initdb and postgres.
func BinDir() (string, error) {
	if d := os.Getenv(EnvBin); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("no initdb in $%s (%s)", EnvBin, d)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb in /usr/lib/postgresql/*/bin")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// credential returns the user to run PostgreSQL as: nil (this process's)
// unless this is root, then the postgres user.
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, os.Getuid(), os.Getgid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root, and initdb refuses root: create a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

// Start runs initdb and the server with the binaries in bin.
func Start(bin string) (_ *Cluster, err error) {
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "toolscope-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, socket: filepath.Join(dir, "run"), exited: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if err := os.Mkdir(c.socket, 0o700); err != nil {
		return nil, err
	}
	for _, p := range []string{dir, c.socket} {
		if err := os.Chown(p, uid, gid); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", c.socket,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "max_connections=200")
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	log, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	if err := c.waitReady(ctx); err != nil {
		out, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	return c, nil
}

// waitReady polls a connection until the server answers or ctx ends.
func (c *Cluster) waitReady(ctx context.Context) error {
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		if err := db.PingContext(ctx); err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return errors.New("postgres exited while starting")
		case <-ctx.Done():
			return fmt.Errorf("postgres did not answer within %v", StartTimeout)
		case <-time.After(delay):
		}
	}
}

// URL returns the connection URL of database on the cluster's socket, as
// user postgres without a password (the cluster trusts local users).
func (c *Cluster) URL(database string) string {
	q := url.Values{}
	q.Set("host", c.socket)
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database, RawQuery: q.Encode()}).String()
}

// NewDatabase creates an empty database and returns its URL; t's cleanup
// drops it.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", c.dbs.Add(1))
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		_ = db.Close()
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return c.URL(name)
}

// Stop ends the server (a fast shutdown, then a kill after StartTimeout)
// and removes the cluster's directory.
func (c *Cluster) Stop() error {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT) // fast shutdown: ends the backends too
		select {
		case <-c.exited:
		case <-time.After(StartTimeout):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
	}
	return os.RemoveAll(c.dir)
}
