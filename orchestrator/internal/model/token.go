package model

import "time"

// APIToken is an API token's record. Its secret is never part of it: the
// store keeps only a hash, and the secret is shown once, at creation.
type APIToken struct {
	ID        string // "tok_" + 10 base32 characters; also part of the secret
	Name      string // unique; the caller's name (Actor.Name) when it is used
	Role      Role
	CreatedBy string // the creator, as Actor.String renders it
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time // zero until revoked
}

// Usable reports whether the token authenticates callers at now: neither
// revoked nor expired.
func (t APIToken) Usable(now time.Time) bool {
	return t.RevokedAt.IsZero() && now.Before(t.ExpiresAt)
}

// RevokedCertificate is a client certificate the orchestrator refuses
// from its revocation on, whatever CA signed it and however long it is
// still valid for.
type RevokedCertificate struct {
	// Serial is the certificate's serial number in lowercase hex without
	// leading zeros (CertificateSerial): what identifies it.
	Serial string
	// Name, Issuer and NotAfter describe it, from the certificate when the
	// revocation was given one; Name is its common name (Actor.Name).
	Name, Issuer string
	NotAfter     time.Time
	RevokedBy    string // as Actor.String renders it
	RevokedAt    time.Time
}
