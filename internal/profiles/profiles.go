// Package profiles turns an agent profile into what agentctl starts: the
// command line, the environment, and the MCP configuration files the agent
// reads, pointing at the session's endpoint. agentctl renders a profile at
// launch with the real endpoint; the orchestrator renders it with
// placeholders for `session launch --dry-run`: one function, so a dry run
// shows exactly what a launch starts.
//
// Model credentials are references: the names of environment variables the
// agent reads, passed through from the executor's environment, never
// values. What passes through is an allowlist (Allowed, in env.go).
package profiles

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Profiles.
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
	Command    = "command" // the given command, with the TOOLSCOPE_MCP_* variables only
)

// ServerName is the name of the session's MCP server in every agent's
// configuration: Claude Code names its tools mcp__toolscope__<tool>,
// Codex offers them in the mcp__toolscope namespace.
const ServerName = "toolscope"

// ClaudeCodeGrant is the permission rule that lets a headless Claude Code
// call every tool of the session's server, and nothing else.
const ClaudeCodeGrant = "mcp__" + ServerName

// Names lists the profiles.
var Names = []string{ClaudeCode, Codex, Command}

// Auth is how a profile's agent pays for its model.
const (
	// AuthAPIKey passes the profile's key variables (KeyEnv) and
	// CredentialEnv from the executor's environment; a launch without one
	// set is refused.
	AuthAPIKey = "api-key"
	// AuthSubscription passes no key variable, even one that is set: the
	// agent uses its own login (CLAUDE_CONFIG_DIR, CODEX_HOME, passed with
	// --env).
	AuthSubscription = "subscription"
	// DefaultAuth is the auth of a claude-code or codex launch that names
	// none.
	DefaultAuth = AuthAPIKey
)

// Auths lists the auths.
var Auths = []string{AuthAPIKey, AuthSubscription}

// paid reports whether profile runs a model the launch pays for (and so
// takes an auth).
func paid(profile string) bool { return profile == ClaudeCode || profile == Codex }

// Spec is what the user chose.
type Spec struct {
	Profile string
	// Args are extra arguments for the agent (for Command: the whole
	// command line).
	Args []string
	// Model, if set, is passed to the agent's model flag or setting.
	Model string
	// CredentialEnv is the environment variable holding the model API key;
	// empty means the profile's (KeyEnv). Only with AuthAPIKey.
	CredentialEnv string
	// Auth is AuthAPIKey or AuthSubscription (empty: DefaultAuth), for the
	// claude-code and codex profiles.
	Auth string
	// PassEnv names more variables to pass through from the executor's
	// environment (`session launch --env NAME`): names, never values. (A
	// Plan's PassEnv is the whole list: these and the rest of Allowed.)
	PassEnv []string
}

// Endpoint is where the agent finds its session.
type Endpoint struct {
	URL, Token string
	// Bridge is the path of the session's bridge.json; Agentctl the path of
	// the agentctl binary (for `agentctl mcp`, the stdio server).
	Bridge, Agentctl string
	// Dir is the session's directory, where profile files are written.
	Dir string
}

// File is a configuration file the agent reads.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Plan is what agentctl starts for a session.
type Plan struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env"`
	// PassEnv names every variable passed through from the executor's
	// environment (Allowed): nothing else of it reaches the agent. Names
	// only, never values.
	PassEnv []string `json:"pass_env"`
	Files   []File   `json:"files"`
	// Reach is what the agent must reach to find its tools: an agent
	// under a uid of its own that cannot would run without them, so
	// agentctl refuses to start it.
	Reach []Reach `json:"reach"`
}

// Reach is a path the agent reads (its MCP configuration) or runs (the
// stdio MCP server it spawns) to find its tools.
type Reach struct {
	Path string `json:"path"`
	Run  bool   `json:"run,omitempty"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// AuthOf returns the spec's auth: its own, the default for a profile
// that takes one, or "" for one that does not.
func (s Spec) AuthOf() string {
	if !paid(s.Profile) {
		return s.Auth
	}
	if s.Auth == "" {
		return DefaultAuth
	}
	return s.Auth
}

// Validate checks a spec before anything is rendered or started.
func (s Spec) Validate() error {
	switch s.Profile {
	case ClaudeCode, Codex, "":
	case Command:
		if len(s.Args) == 0 {
			return fmt.Errorf("profile %q needs the agent command", Command)
		}
	default:
		return fmt.Errorf("unknown agent profile %q; use one of %s", s.Profile, strings.Join(Names, ", "))
	}
	if err := s.checkModel(); err != nil {
		return err
	}
	if err := s.checkAuth(); err != nil {
		return err
	}
	if s.CredentialEnv != "" && !envName.MatchString(s.CredentialEnv) {
		return fmt.Errorf("credential_env must be an environment variable name (the value is not shown)")
	}
	if len(s.PassEnv) > MaxPassEnv {
		return fmt.Errorf("at most %d --env names, not %d", MaxPassEnv, len(s.PassEnv))
	}
	for _, n := range s.PassEnv {
		if err := ValidateEnvName(n); err != nil {
			return fmt.Errorf("--env: %w", err)
		}
	}
	return nil
}

// checkAuth refuses an auth the profile does not take, and a key named
// for a launch that passes none.
func (s Spec) checkAuth() error {
	switch {
	case s.Auth != "" && !slices.Contains(Auths, s.Auth):
		return fmt.Errorf("unknown --auth %q; use %s (the default) or %s", s.Auth, AuthAPIKey, AuthSubscription)
	case s.Auth != "" && !paid(s.Profile):
		return fmt.Errorf("--auth is for the %s and %s profiles, not %q", ClaudeCode, Codex, profileName(s.Profile))
	case s.AuthOf() != AuthSubscription:
		return nil
	case s.CredentialEnv != "":
		return fmt.Errorf("--credential-env names an API key, and --auth %s passes none: drop one of them", AuthSubscription)
	}
	for _, n := range s.PassEnv {
		if slices.Contains(KeyEnv[s.Profile], n) {
			return fmt.Errorf("--env %s passes an API key, and --auth %s passes none: drop one of them", n, AuthSubscription)
		}
	}
	return nil
}

// Render returns the plan for spec at endpoint.
func Render(s Spec, ep Endpoint) (Plan, error) {
	if err := s.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Env: map[string]string{}, PassEnv: Allowed(s), Files: []File{}}
	switch s.Profile {
	case ClaudeCode:
		cfg := filepath.Join(ep.Dir, "claude-mcp.json")
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"mcpServers": map[string]any{ServerName: map[string]any{
			"type": "http", "url": ep.URL, "headers": map[string]string{"Authorization": "Bearer " + ep.Token},
		}}})
		p.Files = append(p.Files, File{Path: cfg, Content: b.String()})
		p.Reach = []Reach{{Path: cfg}}
		// Headless runs (-p) refuse every tool not granted in advance, and
		// --dangerously-skip-permissions is refused as root: grant the
		// session's own server, and only it. --strict-mcp-config ignores
		// the user's other MCP servers for the run; their settings stay.
		p.Argv = []string{"claude", "--allowedTools", ClaudeCodeGrant, "--mcp-config", cfg, "--strict-mcp-config"}
		if s.Model != "" {
			p.Argv = append(p.Argv, "--model", s.Model)
		}
		p.Argv = append(p.Argv, s.Args...)
	case Codex:
		// Codex spawns stdio MCP servers: agentctl mcp mirrors the session,
		// so no token goes on the command line. The server is added with
		// -c overrides, so the user's Codex home (config.toml, login, model
		// provider) stays as it is.
		p.Argv = []string{"codex",
			"-c", "mcp_servers." + ServerName + ".command=" + strconv.Quote(ep.Agentctl),
			"-c", "mcp_servers." + ServerName + ".args=[" + strconv.Quote("mcp") + ", " + strconv.Quote("--config") + ", " + strconv.Quote(ep.Bridge) + "]",
			// codex exec runs with approval "never": a tool that needs an
			// approval fails. The session's own tools are approved, and
			// only they; the orchestrator checks every call again.
			"-c", "mcp_servers." + ServerName + `.default_tools_approval_mode="approve"`}
		p.Reach = []Reach{{Path: ep.Agentctl, Run: true}, {Path: ep.Bridge}}
		if s.Model != "" {
			p.Argv = append(p.Argv, "-c", "model="+strconv.Quote(s.Model))
		}
		p.Argv = append(p.Argv, s.Args...)
	case Command, "":
		// What a command reaches its tools by (TOOLSCOPE_MCP_URL, or
		// mcp.json, or none at all) is its own: nothing is required.
		p.Argv = append([]string(nil), s.Args...)
	}
	return p, nil
}
