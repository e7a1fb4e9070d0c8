package store

import "testing"

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, sqlite, pg string }{
		{`SELECT 1`, `SELECT 1`, `SELECT 1`},
		{`a = ? AND b = ?`, `a = ? AND b = ?`, `a = $1 AND b = $2`},
		{`id = ?1 OR name = ?1`, `id = ?1 OR name = ?1`, `id = $1 OR name = $1`},
		{`x = '?' AND y = 'it''s?' AND z = ?`, `x = '?' AND y = 'it''s?' AND z = ?`, `x = '?' AND y = 'it''s?' AND z = $1`},
	} {
		if got := dialectSQLite.rebind(c.in); got != c.sqlite {
			t.Errorf("sqlite rebind(%q) = %q", c.in, got)
		}
		if got := dialectPostgres.rebind(c.in); got != c.pg {
			t.Errorf("postgres rebind(%q) = %q, want %q", c.in, got, c.pg)
		}
	}
}

func TestArgsTurnBoolsIntoIntegersForPostgres(t *testing.T) {
	in := []any{true, "x", false}
	got := dialectPostgres.args(in)
	if got[0] != 1 || got[1] != "x" || got[2] != 0 {
		t.Errorf("postgres args = %v", got)
	}
	if in[0] != true {
		t.Error("args changed its argument")
	}
	if got := dialectSQLite.args(in); got[0] != true {
		t.Errorf("sqlite args = %v", got)
	}
}
