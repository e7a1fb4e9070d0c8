package profiles

import (
	"fmt"
	"slices"
	"strings"
)

// The agent environment is an allowlist: nothing of the environment of
// whatever starts agentctl (the orchestrator, a container image, an
// operator's shell on a remote host) reaches agentctl or the agent unless
// its name is listed by Allowed. The executors start agentctl with
// Filter(environ, Allowed(spec)), and agentctl starts the agent with the
// same filter over its own environment, plus the variables it sets
// itself (the plan's Env and the TOOLSCOPE_MCP_* endpoint): one rule, two
// places that apply it.

// BaseEnv is what every agent gets from its executor's environment: the
// shell basics, never a credential.
var BaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "TZ"}

// ModelEnv lists, per profile, the variables that say which model
// endpoint the agent uses and how (never a key): passed through by name
// whatever the auth.
var ModelEnv = map[string][]string{
	ClaudeCode: {"ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
	Codex:      {"OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"},
}

// KeyEnv lists, per profile, the variables that carry a model API key:
// passed through by name with --auth api-key, never with --auth
// subscription (even when set). Their values are never stored or shown.
var KeyEnv = map[string][]string{
	ClaudeCode: {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"},
	Codex:      {"OPENAI_API_KEY"},
}

// TracingEnv names the OTEL_* variables that configure tracing
// (package tracing): what an
// executor passes from the orchestrator's environment to agentctl, so
// that agentctl traces as the operator set up the orchestrator to. They
// are agentctl's, not the agent's: Allowed does not hold them, so
// agentctl's filter for the agent drops them unless a launch names one
// with --env. OTEL_SERVICE_NAME is not among them: agentctl names itself.
var TracingEnv = []string{
	"OTEL_SDK_DISABLED",
	"OTEL_TRACES_EXPORTER",
	"OTEL_TRACES_SAMPLER",
	"OTEL_TRACES_SAMPLER_ARG",
	"OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_TIMEOUT",
	"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_EXPORTER_OTLP_INSECURE",
	"OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY",
	"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
	"OTEL_BSP_SCHEDULE_DELAY",
	"OTEL_BSP_EXPORT_TIMEOUT",
	"OTEL_BSP_MAX_QUEUE_SIZE",
	"OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
}

// ReservedPrefix starts the names agentctl owns (its launch secret, the
// session's MCP endpoint): no launch may pass one through.
const ReservedPrefix = "TOOLSCOPE_"

// MaxPassEnv bounds the names a launch may add with --env.
const MaxPassEnv = 64

// ValidateEnvName checks a name a launch passes through with --env. The
// error names the bad name but says nothing of any value.
func ValidateEnvName(name string) error {
	if before, _, isAssignment := strings.Cut(name, "="); isAssignment {
		return fmt.Errorf("%q=... is an assignment: give only the NAME; the value comes from the executor's environment and is never sent", before)
	}
	switch {
	case !envName.MatchString(name):
		return fmt.Errorf("this is not an environment variable name (letters, digits and '_', not starting with a digit); give the NAME, the value comes from the executor's environment")
	case strings.HasPrefix(strings.ToUpper(name), ReservedPrefix):
		return fmt.Errorf("%q is reserved: agentctl sets the %s* variables itself", name, ReservedPrefix)
	}
	return nil
}

// Allowed returns the names of the variables passed through from the
// executor's environment for spec, sorted and without repeats: BaseEnv,
// the profile's ModelEnv, with --auth api-key its KeyEnv, the spec's
// CredentialEnv (never with --auth subscription), and its PassEnv names. agentctl's own variables
// (TOOLSCOPE_*) are never among them.
func Allowed(s Spec) []string {
	names := slices.Clone(BaseEnv)
	names = append(names, ModelEnv[s.Profile]...)
	if s.AuthOf() == AuthAPIKey {
		names = append(names, KeyEnv[s.Profile]...)
	}
	if s.CredentialEnv != "" && s.AuthOf() != AuthSubscription {
		names = append(names, s.CredentialEnv)
	}
	names = append(names, s.PassEnv...)
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(strings.ToUpper(n), ReservedPrefix) })
	slices.Sort(names)
	return slices.Compact(names)
}

// Filter keeps the NAME=value entries of environ whose name is in names.
func Filter(environ []string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}
