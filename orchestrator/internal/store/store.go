// Package store persists the orchestrator's records in an embedded SQLite
// database (modernc.org/sqlite, pure Go) under a data directory, or in a
// PostgreSQL database (Options.DatabaseURL; postgres.go, dialect.go and
// ADR 0023 say what differs).
//
// The schema is versioned by goose migrations embedded in the binary. The
// database runs in WAL mode with foreign keys on and a busy timeout; all
// writes go through one connection, each public method is one transaction,
// and a method that fails leaves nothing half-written. Task events are
// appended in the same transaction as the change they record and handed to
// Options.OnCommit only after the commit succeeded.
//
// Errors are errdefs classes: ErrNotFound names the missing id,
// ErrAlreadyExists names what collided, *errdefs.FieldError names the bad
// request field.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// FileName is the database file inside the data directory.
const FileName = "toolscope.db"

// Bounds of the reader pool (Options.MaxReaders, Options.ReaderIdleTime).
// Each connection holds up to three file descriptors (the database, its
// -wal and -shm); a burst of reads waits for a connection rather than
// opening one per read.
const (
	DefaultMaxReaders     = 8
	DefaultReaderIdleTime = time.Minute
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrSchemaTooNew reports a database written by a newer toolscope. It is
// an errdefs.ErrFailedPrecondition.
var ErrSchemaTooNew = fmt.Errorf("database schema is newer than this toolscope: %w", errdefs.ErrFailedPrecondition)

// ErrDamaged reports a database file that cannot be trusted: empty where a
// previous run's data was expected, or failing SQLite's quick_check. It is
// an errdefs.ErrFailedPrecondition.
var ErrDamaged = fmt.Errorf("database is damaged: %w", errdefs.ErrFailedPrecondition)

// Options configure a Store.
type Options struct {
	// Logger receives migration progress; nil discards.
	Logger *slog.Logger
	// OnCommit, if set, receives the events of each committed transaction,
	// in sequence order, after the commit. It must not block for long.
	OnCommit func([]model.Event)
	// Secrets are the credentials event messages and prompts are scrubbed
	// of before they are stored (token-shaped strings always are).
	Secrets *scrub.Set
	// MaxReaders bounds the reader pool's open connections;
	// DefaultMaxReaders if zero.
	MaxReaders int
	// ReaderIdleTime closes a reader connection idle that long;
	// DefaultReaderIdleTime if zero.
	ReaderIdleTime time.Duration
	// DatabaseURL, if set, is a PostgreSQL connection URL
	// (postgres://user@host:port/db?sslmode=...) to use instead of the
	// SQLite file in the data directory. It must not hold a password.
	DatabaseURL string
	// DatabasePassword is the PostgreSQL password, resolved by the caller
	// from a reference (never given on a command line).
	DatabasePassword string
	// Metrics, if set, observes every transaction (metrics.go).
	Metrics *metrics.Metrics
	// Clock is this process's clock, for the records' times; time.Now if
	// nil. Leases never use it (they use the database's clock): tests give
	// a skewed one to show that.
	Clock func() time.Time
}

// Store is the orchestrator's database, SQLite or PostgreSQL. It is safe
// for concurrent use.
type Store struct {
	// mu makes commit order and publish order the same: OnCommit sees
	// events in sequence order. Writes are serialized by w anyway.
	mu   sync.Mutex
	w    conn   // the one writer
	r    conn   // readers
	path string // the SQLite file, or the PostgreSQL URL without secrets
	opts Options
	pg   *pgx.ConnConfig // PostgreSQL: for the follower's LISTEN connection
}

// Open opens (creating if needed) the database in dataDir and migrates it
// to the current schema. A database from a newer schema, or a file that is
// not a toolscope database, is refused before anything is written.
func Open(ctx context.Context, dataDir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if dataDir == "" {
		return nil, errdefs.RequiredField("data_dir")
	}
	if opts.MaxReaders < 0 {
		return nil, errdefs.InvalidField("max_readers", "%d readers; give at least 1", opts.MaxReaders)
	}
	if opts.MaxReaders == 0 {
		opts.MaxReaders = DefaultMaxReaders
	}
	if opts.ReaderIdleTime <= 0 {
		opts.ReaderIdleTime = DefaultReaderIdleTime
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.DatabaseURL != "" {
		return openPostgres(ctx, opts)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, hostError(dataDir, err)
	}
	path := filepath.Join(dataDir, FileName)
	src, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	latest, err := latestMigration(src)
	if err != nil {
		return nil, err
	}
	if err := checkExisting(ctx, path, latest); err != nil {
		return nil, hostError(path, err)
	}

	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.MaxReaders)
	r.SetMaxIdleConns(opts.MaxReaders)
	r.SetConnMaxIdleTime(opts.ReaderIdleTime)
	s := &Store{w: conn{w, dialectSQLite}, r: conn{r, dialectSQLite}, path: path, opts: opts}
	if err := s.migrate(ctx, src, goose.DialectSQLite3); err != nil {
		_ = s.Close()
		if h := hostError(path, err); h != err {
			return nil, h
		}
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// ReaderStats returns the reader pool's statistics.
func (s *Store) ReaderStats() sql.DBStats { return s.r.Stats() }

// Close closes the database.
func (s *Store) Close() error { return errors.Join(s.r.Close(), s.w.Close()) }

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
	}
	return (&url.URL{Scheme: "file", OmitHost: true, Path: path, RawQuery: q.Encode()}).String()
}

// latestMigration returns the highest version among the embedded
// migrations, read from their file names (goose's NNNNN_name.sql).
func latestMigration(src fs.FS) (int64, error) {
	entries, err := fs.Glob(src, "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", e, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// checkExisting refuses, through a read-only connection, a file that is not
// a toolscope database or whose schema is newer than latest. A refused
// database is left as it was found: side files (-wal, -shm) that the check
// itself created are removed.
func checkExisting(ctx context.Context, path string, latest int64) (err error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	if info.Size() == 0 {
		if prev := previousRun(path); len(prev) > 0 {
			return fmt.Errorf("open database %s: it is empty, but the data directory holds %s of a previous run, so its data is gone; "+
				"restore it from a backup (docs/operations.md, Backups), or, to start afresh, move it and those aside: %w",
				path, strings.Join(prev, " and "), ErrDamaged)
		}
		return nil // a database created but never written: a new one
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		side := path + suffix
		if _, statErr := os.Stat(side); errors.Is(statErr, fs.ErrNotExist) {
			defer func() {
				if err != nil {
					_ = os.Remove(side)
				}
			}()
		}
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", OmitHost: true, Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	defer db.Close()
	var tables, versioned int
	err = db.QueryRowContext(ctx,
		`SELECT count(*), count(*) FILTER (WHERE name = 'goose_db_version') FROM sqlite_master WHERE type = 'table'`).
		Scan(&tables, &versioned)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	switch {
	case tables == 0:
		return nil
	case versioned == 0:
		return fmt.Errorf("open database %s: it is not a toolscope database (no schema version table): %w",
			path, errdefs.ErrFailedPrecondition)
	}
	if problems, err := quickCheck(ctx, db); err != nil {
		return fmt.Errorf("open database %s: run quick_check: %w", path, err)
	} else if len(problems) > 0 {
		return fmt.Errorf("open database %s: it is damaged (quick_check: %s); stop here and restore it from a backup "+
			"(docs/operations.md, Backups), keeping the damaged file aside: %w", path, strings.Join(problems, "; "), ErrDamaged)
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&v); err != nil {
		return fmt.Errorf("open database %s: read schema version: %w", path, err)
	}
	if v.Int64 > latest {
		return fmt.Errorf("open database %s: schema version %d, this toolscope knows up to %d; use a newer toolscope: %w",
			path, v.Int64, latest, ErrSchemaTooNew)
	}
	return nil
}

// previousRun returns the files beside the database at path that a
// previous run leaves: its write-ahead log and index, the sessions',
// containers' and logs' directories.
func previousRun(path string) []string {
	var found []string
	dir := filepath.Dir(path)
	for _, name := range []string{FileName + "-wal", FileName + "-shm", "sessions", "containers", "logs"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			found = append(found, name)
		}
	}
	return found
}

// quickCheck runs SQLite's quick_check (the b-trees' structure, without
// matching indexes to tables) and returns its first problems; none means
// the file is sound.
func quickCheck(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(3)`)
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT {
			return []string{se.Error()}, nil
		}
		return nil, err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		if line != "ok" {
			problems = append(problems, strings.Join(strings.Fields(line), " "))
		}
	}
	if err := rows.Err(); err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT {
			return append(problems, se.Error()), nil
		}
		return nil, err
	}
	return problems, nil
}

func (s *Store) migrate(ctx context.Context, src fs.FS, d goose.Dialect, opts ...goose.ProviderOption) error {
	p, err := goose.NewProvider(d, s.w.DB, src, append(opts, goose.WithDisableGlobalRegistry(true))...)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	for _, r := range results {
		s.opts.Logger.Info("applied migration", "version", r.Source.Version, "duration", r.Duration)
	}
	return err
}

// SchemaVersion returns the version of the latest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&v)
	return v.Int64, err
}

// tx is a write transaction that collects the events it appends.
type tx struct {
	sqlTx
	now    time.Time
	events []model.Event
	notify bool            // wake the other replicas' followers although no event was appended
	scrub  *scrub.Scrubber // for what agents and watchers read: event messages, prompts
}

// write runs fn in one immediate transaction on the writer, then hands the
// appended events to OnCommit.
func (s *Store) write(ctx context.Context, fn func(*tx) error) (err error) {
	defer s.observe("write", time.Now(), &err)
	s.mu.Lock()
	defer s.mu.Unlock()
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return hostError(s.path, err)
	}
	if s.w.d == dialectPostgres {
		// One writer at a time across processes, as SQLite's one writer.
		if _, err := sqlTx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, writeLockKey); err != nil {
			_ = sqlTx.Rollback()
			return hostError(s.path, err)
		}
	}
	t := &tx{sqlTx: sqlTx, now: s.opts.Clock().UTC(), scrub: s.opts.Secrets.Scrubber()}
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return hostError(s.path, err)
	}
	if s.w.d == dialectPostgres && (len(t.events) > 0 || t.notify) {
		// Wakes every replica's follower once this commits (FollowCommits):
		// events to publish, or a catalog change to push.
		if _, err := sqlTx.ExecContext(ctx, `SELECT pg_notify('`+commitChannel+`', '')`); err != nil {
			_ = sqlTx.Rollback()
			return hostError(s.path, err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		_ = sqlTx.Rollback()
		return hostError(s.path, err)
	}
	if s.opts.OnCommit != nil && len(t.events) > 0 {
		s.opts.OnCommit(t.events)
	}
	return nil
}

// read runs fn in one read-only transaction on the reader pool, so a
// method that reads with several statements sees one snapshot.
func (s *Store) read(ctx context.Context, fn func(q queryer) error) (err error) {
	defer s.observe("read", time.Now(), &err)
	txOpts := &sql.TxOptions{ReadOnly: true}
	if s.r.d == dialectPostgres {
		txOpts.Isolation = sql.LevelRepeatableRead // one snapshot, as SQLite's read transactions
	}
	t, err := s.r.BeginTx(ctx, txOpts)
	if err != nil {
		return hostError(s.path, err)
	}
	defer func() { _ = t.Rollback() }()
	return fn(t)
}

// newID returns prefix_ followed by 10 random lower-case base32 characters.
func newID(prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var b [10]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return prefix + "_" + string(b[:])
}

const timeLayout = time.RFC3339Nano

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(timeLayout, s)
}

// hostError turns the failures an operator fixes on the host — a full
// disk, a read-only file or file system, an I/O error, a file that cannot
// be opened — into errdefs.ErrUnavailable errors that name the file and
// say what to do. SQLite rolls the transaction back in each case, so
// nothing is half-written. Any other error is returned unchanged.
func hostError(path string, err error) error {
	var se *sqlite.Error
	switch {
	case err == nil:
		return nil
	case isPostgresUnavailable(err):
		return fmt.Errorf("database %s cannot be reached (%v); check that it runs and accepts this user: %w", path, err, errdefs.ErrUnavailable)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s is on a read-only file system; make it writable: %w", path, errdefs.ErrUnavailable)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s is read-only for this user; make it writable: %w", path, errdefs.ErrUnavailable)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("the disk is full at %s; free space there and retry: %w", path, errdefs.ErrUnavailable)
	case !errors.As(err, &se):
		return err
	}
	code := se.Code() & 0xff
	if code == sqlite3.SQLITE_READONLY || code == sqlite3.SQLITE_CANTOPEN || code == sqlite3.SQLITE_IOERR {
		// SQLite says only that it could not open or write; ask the host why.
		for _, p := range []string{path, filepath.Dir(path)} {
			switch err := syscall.Access(p, 2 /* W_OK */); {
			case errors.Is(err, syscall.EROFS):
				return fmt.Errorf("%s is on a read-only file system (%v); make it writable: %w", path, se, errdefs.ErrUnavailable)
			case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
				return fmt.Errorf("%s is read-only for this user (%v); make %s writable: %w", path, se, p, errdefs.ErrUnavailable)
			}
		}
	}
	switch code {
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("the disk is full at %s (%v); free space there and retry: %w", path, se, errdefs.ErrUnavailable)
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%s is read-only (%v); make the file and its directory writable: %w", path, se, errdefs.ErrUnavailable)
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return fmt.Errorf("%s cannot be read or written (%v); check the file, its directory and the disk: %w", path, se, errdefs.ErrUnavailable)
	}
	return err
}

// isConstraint reports whether err is the SQLite extended result code.
func isConstraint(err error, code int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == code
}

func isUnique(err error) bool {
	return isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE) || isConstraint(err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) ||
		isPostgresCode(err, pgUniqueViolation)
}

// placeholders returns "?, ?, ..." with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Scrub removes the known secrets and token-shaped strings from text, as
// the store does for every event message: for text that reaches a reader
// without being stored (a session's agent log).
func (s *Store) Scrub(text string) string { return s.opts.Secrets.Scrubber().String(text) }
