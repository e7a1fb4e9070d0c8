package toolapi

// Mode selects the tools a session's agent is shown. It is the one
// definition: the orchestrator's records (model.Mode), the executors'
// specs (executors.Mode) and agentctl's registry (registry.Mode) name
// this type.
type Mode string

// Modes.
const (
	ModeTask Mode = "task" // task tools plus the provider tools
	ModePlan Mode = "plan" // read-only tools only
)

// Valid reports whether m is a mode.
func (m Mode) Valid() bool { return m == ModeTask || m == ModePlan }
