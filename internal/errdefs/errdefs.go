// Package errdefs defines the domain errors every toolscope component
// returns. Code below the API boundary wraps these sentinels with context;
// only the gRPC boundary (package grpcerr) turns them into status codes, and
// turns status codes back into them on the client side, so errors.Is works
// across the wire.
package errdefs

import (
	"errors"
	"fmt"
)

// The error classes. Test for them with errors.Is.
var (
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnavailable        = errors.New("unavailable")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrPermissionDenied   = errors.New("permission denied")
	// ErrResourceExhausted is a configured limit reached (sessions per
	// agentctl, say); the message names the limit and how to raise it.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrUnimplemented is an operation the other side does not know: an
	// older agentctl than the orchestrator, for example.
	ErrUnimplemented = errors.New("unimplemented")
)

// FieldError is an invalid argument that names the request field at fault.
// It matches ErrInvalidArgument under errors.Is.
type FieldError struct {
	// Field is the request field, in the wire's snake_case, for example
	// "workspace_id" or "repository_ids[2]".
	Field string
	// Reason says what is wrong with it, for example "is required".
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Is reports whether target is ErrInvalidArgument.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidArgument }

// InvalidField returns a FieldError for field with a formatted reason.
func InvalidField(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// RequiredField returns a FieldError saying field must be set.
func RequiredField(field string) error { return &FieldError{Field: field, Reason: "is required"} }

// NotFound returns an ErrNotFound that names the kind of record and its id.
func NotFound(kind, id string) error { return fmt.Errorf("%s %q: %w", kind, id, ErrNotFound) }

// AlreadyExists returns an ErrAlreadyExists that names what collided.
func AlreadyExists(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrAlreadyExists)
}

// FailedPrecondition returns an ErrFailedPrecondition with a formatted reason.
func FailedPrecondition(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrFailedPrecondition)
}

// FieldOf returns the field named by the first FieldError in err's chain,
// or "" if there is none.
func FieldOf(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
