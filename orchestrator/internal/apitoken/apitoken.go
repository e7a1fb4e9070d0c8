// Package apitoken makes and reads API tokens: "tsat_", the token's id,
// "_", 256 random bits in hex. The store keeps only Hash of a token.
package apitoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// An API token as sent is "tsat_", the token's id without its "tok_"
// prefix (10 lower-case base32 characters), "_", and 64 hex digits of
// secret (256 random bits). Pattern matches exactly that, so that
// scrubbers can recognise one anywhere.
var Pattern = regexp.MustCompile(`tsat_[a-z2-7]{10}_[0-9a-f]{64}`)

const (
	tokenPrefix = "tsat_"
	idPrefix    = "tok_"
	idChars     = 10
)

// New returns a new token's id, the token to hand to its user (once),
// and the hash to store.
func New() (id, token string, hash []byte) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var idb [idChars]byte
	_, _ = rand.Read(idb[:]) // never fails (crypto/rand)
	for i := range idb {
		idb[i] = alphabet[idb[i]&31]
	}
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	token = tokenPrefix + string(idb[:]) + "_" + hex.EncodeToString(secret[:])
	return idPrefix + string(idb[:]), token, Hash(token)
}

// Hash is the stored form of a token: SHA-256 of the whole token.
func Hash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// Parse returns the id a well-formed token names.
func Parse(token string) (id string, ok bool) {
	if len(token) != len(tokenPrefix)+idChars+1+64 || !Pattern.MatchString(token) || !strings.HasPrefix(token, tokenPrefix) {
		return "", false
	}
	return idPrefix + token[len(tokenPrefix):len(tokenPrefix)+idChars], true
}
