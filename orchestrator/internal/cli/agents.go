package cli

import (
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/profiles"
)

// resolveAgent turns `--agent NAME` into the launch's agent fields: a
// profile as it is, or a named agent of the config file (its profile,
// model, auth and credential variable), with the flags the user set
// overriding the named agent's. It reports whether the model is to be
// passed unchecked.
func resolveAgent(cmd *cobra.Command, agent *pb.AgentSpec, unchecked bool) (bool, error) {
	name := agent.GetProfile()
	if name == "" || slices.Contains(profiles.Names, name) {
		return unchecked, nil
	}
	path, cfg, err := loadConfig()
	if err != nil {
		return unchecked, err
	}
	alias, ok := cfg.Agents[name]
	if !ok {
		known := "none"
		if len(cfg.Agents) > 0 {
			known = strings.Join(slices.Sorted(maps.Keys(cfg.Agents)), ", ")
		}
		return unchecked, Usagef("unknown --agent %q: not a profile (%s) nor a named agent of %s (%s)",
			name, strings.Join(profiles.Names, ", "), path, known)
	}
	if !slices.Contains(profiles.Names, alias.Profile) {
		return unchecked, Usagef("the named agent %q of %s has profile %q; use one of %s", name, path, alias.Profile, strings.Join(profiles.Names, ", "))
	}
	agent.Profile = alias.Profile
	if !cmd.Flags().Changed("model") {
		agent.Model = alias.Model
	}
	if !cmd.Flags().Changed("auth") {
		agent.Auth = alias.Auth
	}
	if !cmd.Flags().Changed("credential-env") {
		agent.CredentialEnv = alias.CredentialEnv
	}
	return unchecked || alias.ModelUnchecked, nil
}
