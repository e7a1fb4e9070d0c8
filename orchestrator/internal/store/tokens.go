package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// CreateAPIToken records tok with the hash of its secret. tok.ID is the
// caller's (it is part of the secret); CreatedAt is set here.
func (s *Store) CreateAPIToken(ctx context.Context, tok model.APIToken, secretHash []byte) (model.APIToken, error) {
	err := s.write(ctx, func(t *tx) error {
		tok.CreatedAt = t.now
		_, err := t.ExecContext(ctx, `INSERT INTO api_tokens (id, name, role, secret_hash, created_by, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			tok.ID, tok.Name, string(tok.Role), secretHash, tok.CreatedBy, formatTime(t.now), formatTime(tok.ExpiresAt))
		if isUnique(err) {
			return errdefs.AlreadyExists("API token named %q", tok.Name)
		}
		return err
	})
	return tok, err
}

// APITokenByID returns a token and the hash of its secret.
func (s *Store) APITokenByID(ctx context.Context, id string) (tok model.APIToken, secretHash []byte, err error) {
	err = s.read(ctx, func(q queryer) error {
		tok, err = scanAPIToken(q.QueryRowContext(ctx, `SELECT `+apiTokenColumns+`, secret_hash FROM api_tokens WHERE id = ?`, id), &secretHash)
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("API token", id)
		}
		return err
	})
	return tok, secretHash, err
}

// ListAPITokens returns every token, oldest first.
func (s *Store) ListAPITokens(ctx context.Context) (out []model.APIToken, err error) {
	err = s.read(ctx, func(q queryer) error {
		rows, err := q.QueryContext(ctx, `SELECT `+apiTokenColumns+` FROM api_tokens ORDER BY created_at, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			tok, err := scanAPIToken(rows)
			if err != nil {
				return err
			}
			out = append(out, tok)
		}
		return rows.Err()
	})
	return out, err
}

// RevokeAPIToken revokes the token whose id or name is ref. Revoking a
// revoked token is a failed precondition.
func (s *Store) RevokeAPIToken(ctx context.Context, ref string) (tok model.APIToken, err error) {
	err = s.write(ctx, func(t *tx) error {
		tok, err = scanAPIToken(t.QueryRowContext(ctx, `SELECT `+apiTokenColumns+` FROM api_tokens WHERE id = ? OR name = ?`, ref, ref))
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("API token", ref)
		} else if err != nil {
			return err
		}
		if !tok.RevokedAt.IsZero() {
			return errdefs.FailedPrecondition("API token %q was already revoked", ref)
		}
		tok.RevokedAt = t.now
		_, err = t.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE id = ?`, formatTime(t.now), tok.ID)
		return err
	})
	return tok, err
}

const apiTokenColumns = `id, name, role, created_by, created_at, expires_at, revoked_at`

func scanAPIToken(sc scanner, extra ...any) (model.APIToken, error) {
	var tok model.APIToken
	var role, created, expires, revoked string
	if err := sc.Scan(append([]any{&tok.ID, &tok.Name, &role, &tok.CreatedBy, &created, &expires, &revoked}, extra...)...); err != nil {
		return tok, err
	}
	tok.Role = model.Role(role)
	var err error
	if tok.CreatedAt, err = parseTime(created); err != nil {
		return tok, err
	}
	if tok.ExpiresAt, err = parseTime(expires); err != nil {
		return tok, err
	}
	tok.RevokedAt, err = parseTime(revoked)
	return tok, err
}

// RevokeCertificate records rc (its RevokedAt is set here). A serial
// revoked before is a failed precondition.
func (s *Store) RevokeCertificate(ctx context.Context, rc model.RevokedCertificate) (model.RevokedCertificate, error) {
	err := s.write(ctx, func(t *tx) error {
		rc.RevokedAt = t.now
		_, err := t.ExecContext(ctx, `INSERT INTO revoked_certificates (serial, name, issuer, not_after, revoked_by, revoked_at)
			VALUES (?, ?, ?, ?, ?, ?)`, rc.Serial, rc.Name, rc.Issuer, formatTime(rc.NotAfter), rc.RevokedBy, formatTime(t.now))
		if isUnique(err) {
			return errdefs.FailedPrecondition("the certificate with serial %s was already revoked", rc.Serial)
		}
		return err
	})
	return rc, err
}

// CertificateRevocation returns the revocation of the certificate with
// serial, or errdefs.ErrNotFound if it was never revoked.
func (s *Store) CertificateRevocation(ctx context.Context, serial string) (rc model.RevokedCertificate, err error) {
	err = s.read(ctx, func(q queryer) error {
		rc, err = scanRevokedCertificate(q.QueryRowContext(ctx, `SELECT `+revokedColumns+` FROM revoked_certificates WHERE serial = ?`, serial))
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("certificate revocation", serial)
		}
		return err
	})
	return rc, err
}

// ListRevokedCertificates returns every revocation, oldest first.
func (s *Store) ListRevokedCertificates(ctx context.Context) (out []model.RevokedCertificate, err error) {
	err = s.read(ctx, func(q queryer) error {
		rows, err := q.QueryContext(ctx, `SELECT `+revokedColumns+` FROM revoked_certificates ORDER BY revoked_at, serial`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			rc, err := scanRevokedCertificate(rows)
			if err != nil {
				return err
			}
			out = append(out, rc)
		}
		return rows.Err()
	})
	return out, err
}

const revokedColumns = `serial, name, issuer, not_after, revoked_by, revoked_at`

func scanRevokedCertificate(sc scanner) (model.RevokedCertificate, error) {
	var rc model.RevokedCertificate
	var notAfter, revoked string
	if err := sc.Scan(&rc.Serial, &rc.Name, &rc.Issuer, &notAfter, &rc.RevokedBy, &revoked); err != nil {
		return rc, err
	}
	var err error
	if rc.NotAfter, err = parseTime(notAfter); err != nil {
		return rc, err
	}
	rc.RevokedAt, err = parseTime(revoked)
	return rc, err
}
