package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// The store's queries are written once, with SQLite's "?" placeholders.
// The dialect differences that remain are kept here and in the migration
// directories (migrations/ for SQLite, migrations_postgres/ for
// PostgreSQL); docs/decisions/0021-postgres-store.md lists them all:
//
//   - placeholders: PostgreSQL numbers them ($1, $2, ...); rebind rewrites
//     "?" outside string literals.
//   - new row ids: the driver for PostgreSQL has no LastInsertId, so
//     inserts that need the id use RETURNING, which both dialects accept.
//   - untyped parameters: PostgreSQL cannot type a parameter compared
//     with an empty string literal (an optional filter); such parameters
//     are written CAST(? AS TEXT), which both accept.
//   - booleans: both schemas keep them as 0/1 integers (SQLite has no
//     boolean type); SQLite's driver stores a Go bool as 0/1, pgx refuses
//     it for a BIGINT column, so args converts bools for PostgreSQL.
//     Scanning 0/1 into a bool works in both (database/sql converts).
//   - write serialization: SQLite has one writer (BEGIN IMMEDIATE on one
//     connection); PostgreSQL writers, possibly in several processes, take
//     one transaction-scoped advisory lock (writeLockKey) first, so every
//     write transaction sees the previous one's result as SQLite's do.
//   - read snapshots: PostgreSQL reads run at REPEATABLE READ, so a method
//     that reads with several statements sees one snapshot, as SQLite's
//     read transactions do.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

// writeLockKey is the PostgreSQL advisory lock every write transaction
// holds (pg_advisory_xact_lock): "toolscop" as a big-endian int64. goose's
// migration lock uses a different key.
const writeLockKey int64 = 0x746f6f6c73636f70

// rebind returns query with its "?" placeholders numbered for PostgreSQL
// ("?NNN", a numbered one, becomes "$NNN"; a query uses one kind or the other);
// for SQLite it returns query unchanged.
func (d dialect) rebind(query string) string {
	if d != dialectPostgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted // '' inside a literal toggles twice
		case c == '?' && !quoted && i+1 < len(query) && query[i+1] >= '0' && query[i+1] <= '9':
			b.WriteByte('$') // ?NNN, SQLite's numbered parameter: $NNN
			continue
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// args returns args with bools as 0/1 for PostgreSQL; for SQLite it
// returns args unchanged.
func (d dialect) args(args []any) []any {
	if d != dialectPostgres {
		return args
	}
	out := args
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...)
			}
			out[i] = 0
			if b {
				out[i] = 1
			}
		}
	}
	return out
}

// conn is a connection pool whose statements are rebound for its dialect.
type conn struct {
	*sql.DB
	d dialect
}

func (c conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.DB.ExecContext(ctx, c.d.rebind(query), c.d.args(args)...)
}

func (c conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.DB.QueryContext(ctx, c.d.rebind(query), c.d.args(args)...)
}

func (c conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.DB.QueryRowContext(ctx, c.d.rebind(query), c.d.args(args)...)
}

func (c conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (sqlTx, error) {
	t, err := c.DB.BeginTx(ctx, opts)
	return sqlTx{Tx: t, d: c.d}, err
}

// sqlTx is a transaction whose statements are rebound for its dialect.
type sqlTx struct {
	*sql.Tx
	d dialect
}

func (t sqlTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.d.rebind(query), t.d.args(args)...)
}

func (t sqlTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.d.rebind(query), t.d.args(args)...)
}

func (t sqlTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.d.rebind(query), t.d.args(args)...)
}
