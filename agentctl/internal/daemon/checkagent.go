package daemon

import (
	"context"
	"os"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
)

// CheckAgent implements agentctlv1.AgentctlServiceServer: the launch
// checks of profiles.Preflight, on this host, with the environment an
// agent of this command would get (agentctl's own, filtered to its
// allowlist, as startAgent does). The remote executor's preflight.
func (d *Daemon) CheckAgent(_ context.Context, req *agentctlv1.CheckAgentRequest) (*agentctlv1.CheckAgentResponse, error) {
	a := req.GetAgent()
	spec := profileSpec(a)
	if len(spec.Args) == 0 && spec.Profile == "" {
		return &agentctlv1.CheckAgentResponse{}, nil
	}
	if err := spec.Validate(); err != nil {
		return nil, errdefs.InvalidField("agent.profile", "%v", err)
	}
	if err := profiles.Preflight(spec, a.GetWorkingDir(), profiles.Filter(os.Environ(), profiles.Allowed(spec))); err != nil {
		return nil, err
	}
	return &agentctlv1.CheckAgentResponse{}, nil
}

// profileSpec is the agent command as package profiles sees it.
func profileSpec(a *agentctlv1.AgentCommand) profiles.Spec {
	return profiles.Spec{Profile: a.GetProfile(), Args: a.GetArgv(), Model: a.GetModel(), CredentialEnv: a.GetCredentialEnv(),
		PassEnv: a.GetPassEnv(), Auth: a.GetAuth()}
}
