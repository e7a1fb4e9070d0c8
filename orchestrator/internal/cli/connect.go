package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
	"github.com/toolscope/toolscope/orchestrator/internal/paths"
)

// Environment variables the client reads.
const (
	envConfig  = "TOOLSCOPE_CONFIG"
	envContext = "TOOLSCOPE_CONTEXT"
	envAddr    = "TOOLSCOPE_ADDR"
	envToken   = "TOOLSCOPE_TOKEN"
)

// config is the CLI's config file: named contexts, the way kubectl and
// docker keep theirs. It holds references to secrets (a token file, an
// environment variable's name), never a secret.
type config struct {
	CurrentContext string          `json:"current-context,omitempty"`
	Contexts       []clientContext `json:"contexts"`
	// Agents are named agents: `session launch TASK --agent NAME` with
	// NAME one of them launches its profile with its model and auth.
	Agents map[string]agentAlias `json:"agents,omitempty"`
}

// agentAlias is a named agent: a profile, the model it runs and how it
// pays for it. Flags given with --agent NAME override its fields.
type agentAlias struct {
	Profile        string `json:"profile"`
	Model          string `json:"model,omitempty"`
	Auth           string `json:"auth,omitempty"`
	CredentialEnv  string `json:"credential_env,omitempty"` // a variable's name, never a key
	ModelUnchecked bool   `json:"model_unchecked,omitempty"`
}

// clientContext is one orchestrator and how to authenticate to it.
type clientContext struct {
	Name   string `json:"name"`
	Server string `json:"server"` // unix:///path or host:port
	// The API token: read from this file, or from this environment
	// variable, at each command. Never the token itself.
	TokenFile string `json:"token_file,omitempty"`
	TokenEnv  string `json:"token_env,omitempty"`
	// TLS: the CA that signed the server's certificate, and a client
	// certificate and key (whose Subject carries a role).
	CAFile   string `json:"ca_file,omitempty"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// configPath returns $TOOLSCOPE_CONFIG, else
// $XDG_CONFIG_HOME/toolscope/config.json, else
// ~/.config/toolscope/config.json.
func configPath() (string, error) {
	if p := os.Getenv(envConfig); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "toolscope", "config.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the config file (set %s): %w", envConfig, err)
	}
	return filepath.Join(home, ".config", "toolscope", "config.json"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig() (string, config, error) {
	path, err := configPath()
	if err != nil {
		return "", config{}, err
	}
	var c config
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, c, nil
	} else if err != nil {
		return path, c, fmt.Errorf("read the config file %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return path, c, fmt.Errorf("the config file %s is not valid: %w", path, err)
	}
	return path, c, nil
}

// saveConfig writes the config file, mode 0600, atomically.
func saveConfig(path string, c config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (c *config) find(name string) *clientContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// target is where and how a command connects, once flags, environment
// and config file are combined.
type target struct {
	server  string // as the user wrote it: unix:///path or host:port
	context string // the context used, if any
	// Where the context that gave the server was chosen (--context,
	// TOOLSCOPE_CONTEXT, the config file's current context); empty when
	// the server came from elsewhere.
	serverFrom string
	token      string
	ca         string
	cert       string
	key        string
}

// resolve combines, for each setting, a flag, then an environment
// variable, then the context (--context, else $TOOLSCOPE_CONTEXT, else the
// config file's current context). A context chosen with --context counts
// as a flag: its settings beat the environment's.
//
// Only the root's persistent flags count: a subcommand's own flag of the
// same name (workspace connect --token-file, a provider credential's
// reference) shadows the global one there and is never an API credential.
func (a *app) resolve(cmd *cobra.Command) (target, error) {
	flags := cmd.Root().PersistentFlags()
	path, cfg, err := loadConfig()
	if err != nil {
		return target{}, err
	}
	name, byFlag := a.contextName, flags.Changed("context")
	source := "--context"
	if !byFlag {
		name, source = os.Getenv(envContext), envContext
		if name == "" {
			name, source = cfg.CurrentContext, "current-context of "+path
		}
	}
	var ctx *clientContext
	if name != "" {
		if ctx = cfg.find(name); ctx == nil {
			return target{}, Usagef("no context %q (from %s) in %s; 'toolscope context list' shows them", name, source, path)
		}
	}
	t := target{}
	if ctx != nil {
		t.context = ctx.Name
	}
	// The server.
	switch {
	case flags.Changed("server"):
		t.server = a.server
	case byFlag:
		t.server, t.serverFrom = ctx.Server, source
	case os.Getenv(envAddr) != "":
		t.server = os.Getenv(envAddr)
	case ctx != nil:
		t.server, t.serverFrom = ctx.Server, source
	default:
		dir, err := paths.DefaultDataDir()
		if err != nil {
			return target{}, err
		}
		t.server = "unix://" + paths.Socket(dir)
	}
	// The token.
	switch {
	case flags.Changed("token-file"):
		if t.token, err = readToken(a.tokenFile, "--token-file"); err != nil {
			return target{}, err
		}
	case byFlag && (ctx.TokenFile != "" || ctx.TokenEnv != ""):
		if t.token, err = ctx.readToken(); err != nil {
			return target{}, err
		}
	case os.Getenv(envToken) != "":
		t.token = strings.TrimSpace(os.Getenv(envToken))
	case ctx != nil:
		if t.token, err = ctx.readToken(); err != nil {
			return target{}, err
		}
	}
	// TLS files: each flag overrides the context's file.
	if ctx != nil {
		t.ca, t.cert, t.key = ctx.CAFile, ctx.CertFile, ctx.KeyFile
	}
	for _, f := range []struct {
		flag string
		to   *string
		val  string
	}{{"tls-ca", &t.ca, a.tlsCA}, {"tls-cert", &t.cert, a.tlsCert}, {"tls-key", &t.key, a.tlsKey}} {
		if flags.Changed(f.flag) {
			*f.to = f.val
		}
	}
	return t, nil
}

func (c *clientContext) readToken() (string, error) {
	if c.TokenFile != "" {
		return readToken(c.TokenFile, fmt.Sprintf("context %q", c.Name))
	}
	if c.TokenEnv != "" {
		v := strings.TrimSpace(os.Getenv(c.TokenEnv))
		if v == "" {
			return "", Usagef("context %q reads its token from $%s, which is not set", c.Name, c.TokenEnv)
		}
		return v, nil
	}
	return "", nil
}

// readToken reads a token file; the error names the file and where it
// was given, never its content.
func readToken(path, from string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", Usagef("read the token file %s (from %s): %v", path, from, errors.Unwrap(err))
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", Usagef("the token file %s (from %s) is empty", path, from)
	}
	return tok, nil
}

// dial connects to the orchestrator, failing fast with a clear message
// when nothing listens at the address or its socket refuses this user.
func (a *app) dial(ctx context.Context, cmd *cobra.Command) (*grpc.ClientConn, error) {
	if a.conn != nil {
		return a.conn, nil
	}
	t, err := a.resolve(cmd)
	if err != nil {
		return nil, err
	}
	network, addr, grpcTarget := "tcp", t.server, t.server
	if path, ok := strings.CutPrefix(t.server, "unix://"); ok {
		if !filepath.IsAbs(path) {
			return nil, Usagef("server %q: a socket address is unix:// followed by an absolute path", t.server)
		}
		network, addr = "unix", path
	} else if _, _, err := net.SplitHostPort(t.server); err != nil || strings.Contains(t.server, "://") {
		return nil, Usagef("server %q is neither unix:///path nor host:port", t.server)
	}
	useTLS := network == "tcp" && (t.ca != "" || t.cert != "")
	host, _, _ := net.SplitHostPort(addr)
	plainOK := network == "unix" || host == "localhost" || net.ParseIP(host).IsLoopback()
	if t.token != "" && !plainOK && !useTLS {
		return nil, Usagef("refusing to send the API token in clear text to %s: give the server's CA with --tls-ca (or the context's --ca)", t.server)
	}
	var d net.Dialer
	probeCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	probe, err := d.DialContext(probeCtx, network, addr)
	if err != nil {
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			return nil, fmt.Errorf("cannot connect to the toolscope socket %s: permission denied (it belongs to the account the orchestrator runs as; other accounts connect over TCP with an API token): %w",
				addr, errdefs.ErrPermissionDenied)
		}
		if t.serverFrom != "" {
			return nil, fmt.Errorf("cannot reach the toolscope server at %s, the server of context %q (%s): %v; %s: %w",
				t.server, t.context, t.serverFrom, err, switchHint(t), errdefs.ErrUnavailable)
		}
		return nil, fmt.Errorf("cannot reach the toolscope server at %s (start it with 'toolscope serve' or 'make run', or set --server): %v: %w",
			t.server, err, errdefs.ErrUnavailable)
	}
	_ = probe.Close()

	opts := append(grpcerr.DialOptions(), tracesetup.DialOption())
	if useTLS {
		tc, err := clientTLS(t)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if t.token != "" {
		// Never in clear text beyond this host (checked above, and again by gRPC).
		opts = append(opts, grpc.WithPerRPCCredentials(bearer.Credentials(t.token, !plainOK)))
	}
	conn, err := grpc.NewClient(grpcTarget, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", t.server, err)
	}
	a.conn = conn
	return conn, nil
}

// deadSocket reports a dial error that says nothing listens at a Unix
// socket: its file is gone, or left behind by a killed process.
func deadSocket(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// switchHint tells how to stop using a context whose server is
// unreachable, according to where the context was chosen.
func switchHint(t target) string {
	what := "if that orchestrator is gone"
	if t.context == demoContextName {
		what = "if that demo is gone (a demo killed with SIGKILL leaves its context behind)"
	}
	switch {
	case t.serverFrom == "--context":
		return fmt.Sprintf("%s, pick another --context ('toolscope context list' shows them) or drop it with 'toolscope context remove %s'", what, t.context)
	case t.serverFrom == envContext:
		return fmt.Sprintf("%s, unset %s or set it to another context ('toolscope context list' shows them), or drop it with 'toolscope context remove %s'", what, envContext, t.context)
	}
	return fmt.Sprintf("%s, switch with 'toolscope context use NAME' ('toolscope context list' shows them) or drop it with 'toolscope context remove %s'", what, t.context)
}

func clientTLS(t target) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS13}
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, Usagef("read the CA file %s: %v", t.ca, errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, Usagef("the CA file %s holds no PEM certificate", t.ca)
		}
		c.RootCAs = pool
	}
	if t.cert != "" || t.key != "" {
		if t.cert == "" || t.key == "" {
			return nil, Usagef("a client certificate needs both --tls-cert and --tls-key (or the context's cert_file and key_file)")
		}
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, Usagef("load the client certificate %s and key %s: %v", t.cert, t.key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
