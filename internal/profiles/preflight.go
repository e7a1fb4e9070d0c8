package profiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// Launch checks, made before anything is recorded or spawned (issue 19):
// a profile/model pair that cannot work, an agent binary the agent's PATH
// does not hold, an --auth api-key launch whose key variable the
// executor's environment does not set. Each error names what the user
// typed.

// modelFamily says which harness a model name belongs to, by its shape:
// the two vendors' public names do not overlap. A name of neither family
// (a local or proxied model) is left to the harness.
var modelFamily = []struct {
	re      *regexp.Regexp
	profile string
	vendor  string
}{
	{regexp.MustCompile(`(?i)^(anthropic[./:]|(us|eu|apac)\.anthropic\.)?claude|^(opus|sonnet|haiku)(\b|$)`), ClaudeCode, "an Anthropic model"},
	{regexp.MustCompile(`(?i)^(openai/)?(gpt-|chatgpt|codex-|o[1-9](-|$))`), Codex, "an OpenAI model"},
}

// checkModel refuses a model that belongs to the other profile's vendor:
// a Codex launch given an Anthropic model name, or the reverse.
func (s Spec) checkModel() error {
	if s.Model == "" || (s.Profile != ClaudeCode && s.Profile != Codex) {
		return nil
	}
	for _, f := range modelFamily {
		if f.re.MatchString(strings.TrimSpace(s.Model)) && f.profile != s.Profile {
			return fmt.Errorf("model %q is %s; profile %q cannot run it (use profile %q, or a model of the %s family)",
				s.Model, f.vendor, s.Profile, f.profile, familyOf(s.Profile))
		}
	}
	return nil
}

// knownModels are, per profile, the model names a launch takes without
// --model-unchecked: the aliases the agent resolves itself, and the shape
// of its vendor's model ids (versions come faster than releases).
var knownModels = map[string]struct {
	aliases []string
	ids     *regexp.Regexp
	shapes  string
}{
	ClaudeCode: {[]string{"default", "sonnet", "opus", "haiku", "opusplan", "sonnet[1m]"},
		regexp.MustCompile(`^claude-((opus|sonnet|haiku)-[0-9]|[0-9])[a-z0-9.-]*(\[1m\])?$`), "claude-<opus|sonnet|haiku>-<version>"},
	Codex: {[]string{"codex-mini-latest"},
		regexp.MustCompile(`^(gpt-[0-9]+(\.[0-9]+)?|o[0-9])(-[a-z0-9]+)*$`), "gpt-<version>[-<variant>], o<n>[-<variant>]"},
}

// ErrUnknownModel reports a model name the launch's profile does not know.
var ErrUnknownModel = fmt.Errorf("unknown model: %w", errdefs.ErrInvalidArgument)

// CheckModel refuses a model name that profile does not know, naming the
// ones it does. A launch with --model-unchecked skips it (a gateway's
// model, or one newer than this build); the vendor check of Validate
// still holds.
func CheckModel(profile, model string) error {
	known, ok := knownModels[profile]
	if !ok || model == "" || slices.Contains(known.aliases, model) || known.ids.MatchString(model) {
		return nil
	}
	return fmt.Errorf("model %q is not one profile %q knows (%s, or %s); check the name, or launch with --model-unchecked to pass it as it is: %w",
		model, profile, strings.Join(known.aliases, ", "), known.shapes, ErrUnknownModel)
}

func familyOf(profile string) string {
	if profile == ClaudeCode {
		return "Claude"
	}
	return "OpenAI"
}

// ErrAgentNotFound reports an agent command that is not on the PATH the
// agent gets; ErrCredentialUnset a credential variable the executor's
// environment does not set.
var (
	ErrAgentNotFound   = fmt.Errorf("agent command not found: %w", errdefs.ErrFailedPrecondition)
	ErrCredentialUnset = fmt.Errorf("credential variable unset: %w", errdefs.ErrFailedPrecondition)
)

// Preflight checks, on the machine that will spawn the agent, that spec
// can start there: its command is found on the PATH of environ (the
// filtered environment agentctl gets, see Allowed and Filter; a relative
// path is taken from workDir) and, with --auth api-key, the key variable
// (CredentialEnv, or one of the profile's KeyEnv) is set in environ. It
// says nothing of any value.
func Preflight(s Spec, workDir string, environ []string) error {
	return PreflightWith(s, workDir, environ, executable)
}

// PreflightWith is Preflight on a machine the caller reaches its own way:
// exists reports whether path names an executable file there (a stat
// inside a container image, say). The PATH searched is environ's.
func PreflightWith(s Spec, workDir string, environ []string, exists func(path string) error) error {
	plan, err := Render(s, Endpoint{})
	if err != nil {
		return err
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if len(plan.Argv) > 0 {
		if _, err := lookPath(plan.Argv[0], workDir, env["PATH"], exists); err != nil {
			// The words agentctl uses for the same refusal (daemon/session.go),
			// so a user meets one message whichever side refuses.
			if strings.Contains(plan.Argv[0], "/") {
				return fmt.Errorf("agent command `%s` not found on the executor (profile %q): %w", plan.Argv[0], profileName(s.Profile), ErrAgentNotFound)
			}
			return fmt.Errorf("agent command `%s` not found on the executor's PATH %q (profile %q); install it there, or name it by its full path: %w",
				plan.Argv[0], env["PATH"], profileName(s.Profile), ErrAgentNotFound)
		}
	}
	if s.CredentialEnv != "" {
		if env[s.CredentialEnv] == "" {
			return fmt.Errorf("credential_env %q is not set in the executor's environment; export it where the orchestrator runs, or name another variable: %w",
				s.CredentialEnv, ErrCredentialUnset)
		}
		return nil
	}
	if s.AuthOf() != AuthAPIKey {
		return nil
	}
	keys := KeyEnv[s.Profile]
	if !slices.ContainsFunc(keys, func(k string) bool { return env[k] != "" }) {
		return fmt.Errorf("--auth %s (the default) needs a model API key in the executor's environment, and none of %s is set: "+
			"export one where the orchestrator runs, name another variable with --credential-env, "+
			"or launch with --auth %s to use the agent's own login: %w",
			AuthAPIKey, strings.Join(keys, ", "), AuthSubscription, ErrCredentialUnset)
	}
	return nil
}

func profileName(p string) string {
	if p == "" {
		return Command
	}
	return p
}

// lookPath is exec.LookPath over a given PATH (exec.LookPath reads the
// calling process's), the one the agent will have.
func lookPath(file, workDir, path string, executable func(string) error) (string, error) {
	if strings.Contains(file, "/") {
		if !filepath.IsAbs(file) {
			if workDir == "" {
				return file, nil // relative to a directory only the executor knows: left to it
			}
			file = filepath.Join(workDir, file)
		}
		return file, executable(file)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue // an empty entry is the working directory: not trusted
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}
