package service

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/orchestrator/internal/apitoken"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// API token lifetimes.
const (
	DefaultTokenTTL = 30 * 24 * time.Hour
	MaxTokenTTL     = 365 * 24 * time.Hour
)

// CreateAPIToken creates a token for name with role (member if empty),
// valid for ttl (DefaultTokenTTL if zero, at most MaxTokenTTL). It
// returns the token as it must be sent; only its hash is stored.
func (s *Service) CreateAPIToken(ctx context.Context, name string, role model.Role, ttl time.Duration) (model.APIToken, string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return model.APIToken{}, "", errdefs.RequiredField("name")
	case len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x21 || r == 0x7f }):
		return model.APIToken{}, "", errdefs.InvalidField("name", "must be 1 to 64 printable characters without spaces")
	case strings.HasPrefix(name, "local:"):
		return model.APIToken{}, "", errdefs.InvalidField("name", "%q: names starting with \"local:\" are the socket owner's", name)
	}
	if role == "" {
		role = model.RoleMember
	}
	if !role.Valid() {
		return model.APIToken{}, "", errdefs.InvalidField("role", "%q is not viewer, member or admin", role)
	}
	switch {
	case ttl == 0:
		ttl = DefaultTokenTTL
	case ttl < time.Second || ttl > MaxTokenTTL:
		return model.APIToken{}, "", errdefs.InvalidField("ttl", "%s is not between 1s and %s", ttl, MaxTokenTTL)
	}
	id, secret, hash := apitoken.New()
	tok := model.APIToken{ID: id, Name: name, Role: role, ExpiresAt: time.Now().UTC().Add(ttl)}
	if a, ok := model.ActorFrom(ctx); ok {
		tok.CreatedBy = a.String()
	}
	tok, err := s.store.CreateAPIToken(ctx, tok, hash)
	if err != nil {
		return model.APIToken{}, "", err
	}
	s.log.Info("API token created", "token", tok.ID, "name", tok.Name, "role", tok.Role, "by", tok.CreatedBy, "expires", tok.ExpiresAt)
	return tok, secret, nil
}

// ListAPITokens returns every token, revoked and expired ones included.
func (s *Service) ListAPITokens(ctx context.Context) ([]model.APIToken, error) {
	return s.store.ListAPITokens(ctx)
}

// RevokeAPIToken revokes the token whose id or name is ref.
func (s *Service) RevokeAPIToken(ctx context.Context, ref string) (model.APIToken, error) {
	if strings.TrimSpace(ref) == "" {
		return model.APIToken{}, errdefs.RequiredField("api_token")
	}
	tok, err := s.store.RevokeAPIToken(ctx, ref)
	if err == nil {
		by := ""
		if a, ok := model.ActorFrom(ctx); ok {
			by = a.String()
		}
		s.log.Info("API token revoked", "token", tok.ID, "name", tok.Name, "by", by)
	}
	return tok, err
}

// within reports whether path is dir or lies under it, after resolving
// symbolic links as far as they exist (a link outside pointing in counts
// as inside).
func within(path, dir string) bool {
	resolve := func(p string) string {
		p = filepath.Clean(p)
		// Resolve the longest existing prefix; keep the rest as written.
		rest := ""
		for {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Join(r, rest)
			}
			parent := filepath.Dir(p)
			if parent == p {
				return filepath.Join(p, rest)
			}
			rest = filepath.Join(filepath.Base(p), rest)
			p = parent
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for _, d := range []string{filepath.Clean(abs), resolve(abs)} {
		for _, p := range []string{filepath.Clean(path), resolve(path)} {
			if rel, err := filepath.Rel(d, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return true
			}
		}
	}
	return false
}

// RevokeCertificate refuses the client certificate rc.Serial names from
// now on (access.Authenticator asks on every call). Name, Issuer and
// NotAfter only describe it, bounded like other free text.
func (s *Service) RevokeCertificate(ctx context.Context, rc model.RevokedCertificate) (model.RevokedCertificate, error) {
	if strings.TrimSpace(rc.Serial) == "" {
		return model.RevokedCertificate{}, errdefs.RequiredField("serial")
	}
	serial, err := pki.ParseSerial(rc.Serial)
	if err != nil {
		return model.RevokedCertificate{}, errdefs.InvalidField("serial", "%v", err)
	}
	if err := textlimit.Name.Check("name", rc.Name); err != nil {
		return model.RevokedCertificate{}, err
	}
	if err := textlimit.Title.Check("issuer", rc.Issuer); err != nil {
		return model.RevokedCertificate{}, err
	}
	rc.Serial, rc.RevokedBy = serial, ""
	if a, ok := model.ActorFrom(ctx); ok {
		rc.RevokedBy = a.String()
	}
	rc, err = s.store.RevokeCertificate(ctx, rc)
	if err == nil {
		s.log.Info("client certificate revoked", "serial", rc.Serial, "name", rc.Name, "by", rc.RevokedBy)
	}
	return rc, err
}

// ListRevokedCertificates returns every revoked client certificate.
func (s *Service) ListRevokedCertificates(ctx context.Context) ([]model.RevokedCertificate, error) {
	return s.store.ListRevokedCertificates(ctx)
}
