package service

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// The variables a launch passes to its agent by name (--env,
// --credential-env) come from the executor's environment, which on the
// local and docker executors is the orchestrator's own: a member naming
// GH_TOKEN would hand the agent a connection's credential. So such names
// are an administrator's list (toolscope serve --agent-env, patterns as
// path.Match), and never a variable the orchestrator reads itself,
// whatever the list says (issue 33; docs/security.md).

// DefaultAgentEnv is the list when the operator gives none: the agent
// CLIs' own settings.
var DefaultAgentEnv = []string{"CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR", "CODEX_HOME"}

// checkAgentEnv refuses a name of in's --env or --credential-env that is
// not on the list, or that the orchestrator reads itself.
func (s *Service) checkAgentEnv(ctx context.Context, in SessionInput) error {
	type named struct{ field, name string }
	var names []named
	for i, n := range in.AgentPassEnv {
		names = append(names, named{fmt.Sprintf("agent.pass_env[%d]", i), n})
	}
	if in.AgentCredentialEnv != "" {
		names = append(names, named{"agent.credential_env", in.AgentCredentialEnv})
	}
	if len(names) == 0 {
		return nil
	}
	reserved, err := s.orchestratorEnv(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if reserved(n.name) {
			return errdefs.InvalidField(n.field, "%s is a variable the orchestrator reads itself (a connection's or an MCP server's credential, or its own setting); no agent gets it", n.name)
		}
		if !slices.ContainsFunc(s.agentEnv, func(p string) bool { ok, _ := path.Match(p, n.name); return ok }) {
			return errdefs.InvalidField(n.field, "%s is not a variable this orchestrator lets agents have (%s); an administrator adds it with toolscope serve --agent-env %s",
				n.name, strings.Join(s.agentEnv, ", "), n.name)
		}
	}
	return nil
}

// orchestratorEnv returns whether a name is one the orchestrator reads:
// its own (TOOLSCOPE_*, OTEL_*, Options.ReservedEnv) and the variables
// every workspace's connections and every MCP server's references name.
func (s *Service) orchestratorEnv(ctx context.Context) (func(string) bool, error) {
	refs, err := s.credentialRefs(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, n := range s.reservedEnv {
		names[n] = true
	}
	for _, r := range refs {
		if r.Kind == model.CredentialEnv {
			names[r.Ref] = true
		}
	}
	return func(n string) bool {
		upper := strings.ToUpper(n)
		return names[n] || strings.HasPrefix(upper, "TOOLSCOPE_") || strings.HasPrefix(upper, "OTEL_")
	}, nil
}

// credentialRefs returns every credential reference the orchestrator
// holds: each workspace's connections' and each MCP server's (its stdio
// environment's, as references to variables, and its HTTP headers').
func (s *Service) credentialRefs(ctx context.Context) ([]model.CredentialRef, error) {
	var refs []model.CredentialRef
	workspaces, err := s.store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range workspaces {
		for _, c := range w.Connections {
			refs = append(refs, c.Credential)
		}
	}
	servers, err := s.store.ListMCPServers(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range servers {
		if m.Stdio != nil {
			for _, e := range m.Stdio.Env {
				refs = append(refs, model.CredentialRef{Kind: model.CredentialEnv, Ref: e.FromEnv})
			}
		}
		if m.HTTP != nil {
			for _, h := range m.HTTP.Headers {
				refs = append(refs, h.Value)
			}
		}
	}
	return refs, nil
}

// RememberCredentials records the value of every credential the
// orchestrator holds in its scrubbers' set, so that a restarted
// orchestrator redacts each before its first use (issue 33).
func (s *Service) RememberCredentials(ctx context.Context) error {
	refs, err := s.credentialRefs(ctx)
	if err != nil {
		return err
	}
	s.conns.Remember(refs...)
	return nil
}
