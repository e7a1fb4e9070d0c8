package model

import "context"

// Role is what an API caller may do. Roles are ordered: an admin may do
// everything a member may, and a member everything a viewer may.
type Role string

// Roles.
const (
	RoleViewer Role = "viewer" // reads: lists, gets, event streams
	RoleMember Role = "member" // tasks, sources, sessions
	RoleAdmin  Role = "admin"  // workspace connections, the catalog, API tokens
)

// ActorKind says who made a change: a person through the API, or an agent
// through one of its session's tools.
type ActorKind string

// Actor kinds.
const (
	ActorPerson  ActorKind = "person"
	ActorSession ActorKind = "session"
)

// Actor is who made a change, as recorded in events. For a person, Name is
// the authenticated identity (an API token's name, a client certificate's
// common name, or "local:<uid>" for the owner's Unix socket); for a
// session, it is the session ID.
type Actor struct {
	Kind ActorKind
	Name string
	Role Role // for a person
}

// String renders the actor for events and logs: "person:ci-bot",
// "session:ses_123".
func (a Actor) String() string {
	if a.Kind == "" {
		return ""
	}
	return string(a.Kind) + ":" + a.Name
}

type actorKey struct{}

// WithActor returns ctx carrying the caller. The API's authentication puts
// the person there; the tool-call dispatcher puts the session there.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the caller carried by ctx, if any.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}
