package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/toolscope/toolscope/internal/errdefs"
)

//go:embed migrations_postgres/*.sql
var postgresMigrations embed.FS

// pgUniqueViolation is PostgreSQL's SQLSTATE for a unique or primary key
// violation.
const pgUniqueViolation = "23505"

// openPostgres opens the PostgreSQL database at opts.DatabaseURL and
// migrates it. Migrations from several processes at once are serialized by
// goose's session advisory lock: one migrates, the others wait and then
// find nothing to do.
func openPostgres(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(opts.DatabaseURL)
	if err != nil {
		// pgx's message may quote the URL; say only what is wrong.
		return nil, errdefs.InvalidField("database", "not a PostgreSQL connection URL (postgres://user@host:port/database): %v", redactParseError(err))
	}
	if holdsPassword(opts.DatabaseURL) {
		return nil, errdefs.InvalidField("database",
			"the URL holds a password; give it as a reference instead (--database-password-env NAME)")
	}
	if opts.DatabasePassword != "" {
		cfg.Password = opts.DatabasePassword // else pgx's own: $PGPASSWORD, ~/.pgpass
	}
	name := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)

	src, err := fs.Sub(postgresMigrations, "migrations_postgres")
	if err != nil {
		return nil, err
	}
	latest, err := latestMigration(src)
	if err != nil {
		return nil, err
	}
	w := stdlib.OpenDB(*cfg.Copy())
	w.SetMaxOpenConns(1)
	r := stdlib.OpenDB(*cfg.Copy())
	r.SetMaxOpenConns(opts.MaxReaders)
	r.SetMaxIdleConns(opts.MaxReaders)
	r.SetConnMaxIdleTime(opts.ReaderIdleTime)
	s := &Store{w: conn{w, dialectPostgres}, r: conn{r, dialectPostgres}, path: name, opts: opts, pg: cfg.Copy()}
	if err := w.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, hostError(name, err)
	}
	if err := checkExistingPostgres(ctx, s.w, name, latest); err != nil {
		_ = s.Close()
		return nil, hostError(name, err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.migrate(ctx, src, goose.DialectPostgres, goose.WithSessionLocker(locker)); err != nil {
		_ = s.Close()
		if h := hostError(name, err); h != err {
			return nil, h
		}
		return nil, fmt.Errorf("migrate database %s: %w", name, err)
	}
	return s, nil
}

// checkExistingPostgres refuses a database that holds tables but no
// toolscope schema version, or a schema newer than latest.
func checkExistingPostgres(ctx context.Context, c conn, name string, latest int64) error {
	var tables, versioned int
	err := c.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE table_name = 'goose_db_version')
		FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables, &versioned)
	if err != nil {
		return fmt.Errorf("open database %s: %w", name, err)
	}
	switch {
	case tables == 0:
		return nil
	case versioned == 0:
		return fmt.Errorf("open database %s: it is not a toolscope database (no schema version table): %w",
			name, errdefs.ErrFailedPrecondition)
	}
	var v sql.NullInt64
	if err := c.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&v); err != nil {
		return fmt.Errorf("open database %s: read schema version: %w", name, err)
	}
	if v.Int64 > latest {
		return fmt.Errorf("open database %s: schema version %d, this toolscope knows up to %d; use a newer toolscope: %w",
			name, v.Int64, latest, ErrSchemaTooNew)
	}
	return nil
}

// isPostgresUnavailable reports a PostgreSQL server that cannot be reached
// or refuses the connection (wrong host, port, user, password or database).
func isPostgresUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's deadline, not the database's: keep it as it is
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne)
}

func isPostgresCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// redactParseError drops the URL pgx may quote in a parse error.
func redactParseError(err error) string {
	var pe *pgconn.ParseConfigError
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error() // url.Error quotes the URL
	}
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap().Error()
	}
	if errors.As(err, &pe) {
		// "cannot parse `<url>`: <what>": keep what.
		if i := strings.LastIndex(pe.Error(), "`: "); i >= 0 {
			return pe.Error()[i+3:]
		}
		return "malformed"
	}
	return err.Error()
}

// holdsPassword reports whether a connection string (a URL, or
// keyword=value pairs) itself holds a password.
func holdsPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "password=") {
			return true
		}
	}
	return false
}
