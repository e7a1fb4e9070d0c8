// Package credentials resolves a connection's credential reference — an
// environment variable of the orchestrator process, or a file — to the
// secret, at the moment it is needed. The secret is handed to an API
// client and nowhere else; errors name the reference, never a value. Every
// value resolved is recorded in the resolver's scrub.Set, so the
// scrubbers at the orchestrator's boundaries (tool results, events, logs)
// know it before anything it could be echoed in leaves.
package credentials

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// Resolver reads credentials. The zero value reads the process
// environment and the file system.
type Resolver struct {
	// Env looks up an environment variable; nil means os.LookupEnv.
	Env func(string) (string, bool)
	// Secrets records every value resolved; nil records nothing.
	Secrets *scrub.Set
}

// Resolve returns the secret ref points to, and records it in Secrets.
func (r Resolver) Resolve(ref model.CredentialRef) (string, error) {
	v, err := r.resolve(ref)
	if err == nil {
		r.Secrets.Add(v)
	}
	return v, err
}

func (r Resolver) resolve(ref model.CredentialRef) (string, error) {
	env := r.Env
	if env == nil {
		env = os.LookupEnv
	}
	switch ref.Kind {
	case model.CredentialEnv:
		if v, ok := env(ref.Ref); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), nil
		}
		return "", fmt.Errorf("environment variable %s is not set in the orchestrator's environment", ref.Ref)
	case model.CredentialFile:
		b, err := os.ReadFile(ref.Ref)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return "", fmt.Errorf("file %s is missing, unreadable or empty", ref.Ref)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", errors.New("the connection has no credential reference")
}
