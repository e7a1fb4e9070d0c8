package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
)

func roleName(r pb.Role) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

func parseRole(s string) (pb.Role, error) {
	r, ok := pb.Role_value["ROLE_"+strings.ToUpper(s)]
	if !ok || r == 0 {
		return 0, Usagef("invalid --role %q: use viewer, member or admin", s)
	}
	return pb.Role(r), nil
}

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens, the credentials of callers over TCP (admin)",
		Long: `API tokens authenticate callers on the orchestrator's TCP listener
('serve --listen'). A token has a name, a role (viewer, member or admin) and an
expiry (default 30 days, at most 365). The orchestrator stores only a hash: the
token is printed once, by 'token create'. Tokens look like
tsat_<10 characters>_<64 hex digits>.`,
	}
	var role string
	var ttl time.Duration
	create := &cobra.Command{
		Use: "create NAME [--role ROLE] [--ttl DURATION]", Short: "Create a token and print it, once", Args: ExactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := parseRole(role)
			if err != nil {
				return err
			}
			req := &pb.CreateAPITokenRequest{Name: args[0], Role: r}
			if cmd.Flags().Changed("ttl") {
				req.Ttl = durationpb.New(ttl)
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := pb.NewAuthServiceClient(conn).CreateAPIToken(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.emit(resp, nil)
				}
				// The token alone on stdout, so that '> file' keeps just it;
				// the note on stderr.
				t := resp.GetApiToken()
				fmt.Fprintf(a.stderr, "token %s (%s, role %s) expires %s; this is the only time it is shown\n",
					t.GetId(), t.GetName(), roleName(t.GetRole()), t.GetExpireTime().AsTime().Format(time.RFC3339))
				_, err = fmt.Fprintln(a.stdout, resp.GetSecret())
				return err
			})
		},
	}
	create.Flags().StringVar(&role, "role", "member", "viewer, member or admin")
	create.Flags().DurationVar(&ttl, "ttl", 30*24*time.Hour, "lifetime, at most 8760h (365 days)")
	list := &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := pb.NewAuthServiceClient(conn).ListAPITokens(ctx, &pb.ListAPITokensRequest{})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintln(w, "ID\tNAME\tROLE\tEXPIRES\tSTATE\tCREATED BY")
					now := time.Now()
					for _, t := range resp.GetApiTokens() {
						state := "active"
						switch {
						case t.GetRevokeTime() != nil:
							state = "revoked"
						case !t.GetExpireTime().AsTime().After(now):
							state = "expired"
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.GetId(), t.GetName(), roleName(t.GetRole()),
							t.GetExpireTime().AsTime().Format(time.RFC3339), state, orDash(t.GetCreatedBy()))
					}
				})
			})
		},
	}
	revoke := &cobra.Command{
		Use: "revoke TOKEN", Short: "Revoke a token (by id or name), at once", Args: ExactArgs("TOKEN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := pb.NewAuthServiceClient(conn).RevokeAPIToken(ctx, &pb.RevokeAPITokenRequest{ApiToken: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintf(w, "revoked %s (%s)\n", resp.GetApiToken().GetId(), resp.GetApiToken().GetName())
				})
			})
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (a *app) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use: "whoami", Short: "Show who the orchestrator takes you for, and your role", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := pb.NewAuthServiceClient(conn).WhoAmI(ctx, &pb.WhoAmIRequest{})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintf(w, "%s\trole %s\tby %s\n", resp.GetName(), roleName(resp.GetRole()), resp.GetMethod())
				})
			})
		},
	}
}

// contextName is a context's name, at most 64 bytes (checked apart: a
// bounded repetition compiles into a program as many times as long, paid
// at every CLI call's start).
var contextName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func validContextName(s string) bool { return len(s) <= 64 && contextName.MatchString(s) }

// contextCmd manages the config file's contexts. It works on the local
// file only.
func (a *app) contextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Manage named contexts: which orchestrator to talk to, and how to authenticate",
		Long: `A context names an orchestrator (unix:///path or host:port) and how to
authenticate to it: a token file or the name of an environment variable holding
the token (references only: the config file never holds a token), and TLS files.
The config file is $TOOLSCOPE_CONFIG, else $XDG_CONFIG_HOME/toolscope/config.json,
else ~/.config/toolscope/config.json, written 0600.

Which setting applies: a flag (--server, --token-file, --tls-*; --context selects
a context at flag level), then the environment (TOOLSCOPE_ADDR, TOOLSCOPE_TOKEN,
TOOLSCOPE_CONTEXT), then the current context. With none of them, the CLI talks
to the local orchestrator's socket, <data-dir>/toolscope.sock.`,
	}
	list := &cobra.Command{
		Use: "list", Short: "List the contexts", Args: ExactArgs(),
		RunE: func(*cobra.Command, []string) error {
			path, cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if a.json {
				if cfg.Contexts == nil {
					cfg.Contexts = []clientContext{}
				}
				return json.NewEncoder(a.stdout).Encode(map[string]any{"config": path, "current-context": cfg.CurrentContext, "contexts": cfg.Contexts})
			}
			return a.emitTable(func(w io.Writer) {
				fmt.Fprintln(w, "CURRENT\tNAME\tSERVER\tTOKEN\tTLS")
				for _, c := range cfg.Contexts {
					cur := ""
					if c.Name == cfg.CurrentContext {
						cur = "*"
					}
					tok := "-"
					if c.TokenFile != "" {
						tok = "file " + c.TokenFile
					} else if c.TokenEnv != "" {
						tok = "$" + c.TokenEnv
					}
					tlsDesc := "-"
					if c.CAFile != "" || c.CertFile != "" {
						tlsDesc = "yes"
						if c.CertFile != "" {
							tlsDesc = "client cert " + c.CertFile
						}
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cur, c.Name, c.Server, tok, tlsDesc)
				}
				if len(cfg.Contexts) == 0 {
					fmt.Fprintf(w, "no contexts in %s: commands talk to the local socket\n", path)
				}
			})
		},
	}
	use := &cobra.Command{
		Use: "use NAME", Short: "Make NAME the current context", Args: ExactArgs("NAME"),
		RunE: func(_ *cobra.Command, args []string) error {
			path, cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if cfg.find(args[0]) == nil {
				return Usagef("no context %q in %s; 'toolscope context list' shows them", args[0], path)
			}
			cfg.CurrentContext = args[0]
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			return a.contextReport(path, args[0], "current context: "+args[0])
		},
	}
	var c clientContext
	set := &cobra.Command{
		Use:   "set NAME [--server ADDR] [--token-file FILE | --token-env VAR] [--ca FILE] [--cert FILE --key FILE]",
		Short: "Create or change a context (the first one becomes current)",
		Args:  ExactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !validContextName(name) {
				return Usagef("invalid context name %q: letters, digits, '.', '_' and '-', at most 64", name)
			}
			path, cfg, err := loadConfig()
			if err != nil {
				return err
			}
			cur := cfg.find(name)
			if cur == nil {
				cfg.Contexts = append(cfg.Contexts, clientContext{Name: name})
				cur = &cfg.Contexts[len(cfg.Contexts)-1]
			}
			fl := cmd.Flags()
			if fl.Changed("token-file") && fl.Changed("token-env") {
				return Usagef("--token-file and --token-env exclude each other")
			}
			if fl.Changed("server") {
				cur.Server = c.Server
			}
			if fl.Changed("token-file") {
				cur.TokenEnv = ""
				if cur.TokenFile, err = absOrEmpty(c.TokenFile); err != nil {
					return err
				}
			}
			if fl.Changed("token-env") {
				cur.TokenFile = ""
				if c.TokenEnv != "" && (looksLikeToken(c.TokenEnv) || !envName.MatchString(c.TokenEnv)) {
					return Usagef("invalid --token-env: the name of an environment variable (letters, digits and _), not a token (the value is not shown)")
				}
				cur.TokenEnv = c.TokenEnv
			}
			for _, f := range []struct {
				flag     string
				from, to *string
			}{{"ca", &c.CAFile, &cur.CAFile}, {"cert", &c.CertFile, &cur.CertFile}, {"key", &c.KeyFile, &cur.KeyFile}} {
				if fl.Changed(f.flag) {
					if *f.to, err = absOrEmpty(*f.from); err != nil {
						return err
					}
				}
			}
			if cur.Server == "" {
				return Usagef("context %q needs --server (unix:///path or host:port)", name)
			}
			if _, ok := strings.CutPrefix(cur.Server, "unix://"); !ok {
				if _, _, err := net.SplitHostPort(cur.Server); err != nil {
					return Usagef("invalid --server %q: use unix:///path or host:port", cur.Server)
				}
			}
			if cfg.CurrentContext == "" {
				cfg.CurrentContext = name
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			return a.contextReport(path, name, fmt.Sprintf("context %s saved in %s", name, path))
		},
	}
	set.Flags().StringVar(&c.Server, "server", "", "unix:///path or host:port")
	set.Flags().StringVar(&c.TokenFile, "token-file", "", "file holding the API token (read at each command)")
	set.Flags().StringVar(&c.TokenEnv, "token-env", "", "environment variable holding the API token")
	set.Flags().StringVar(&c.CAFile, "ca", "", "CA certificate of the server's TLS certificate")
	set.Flags().StringVar(&c.CertFile, "cert", "", "client certificate (its Subject carries the role)")
	set.Flags().StringVar(&c.KeyFile, "key", "", "client certificate's private key")
	remove := &cobra.Command{
		Use: "remove NAME", Short: "Remove a context", Args: ExactArgs("NAME"),
		RunE: func(_ *cobra.Command, args []string) error {
			path, cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if cfg.find(args[0]) == nil {
				return Usagef("no context %q in %s; 'toolscope context list' shows them", args[0], path)
			}
			kept := cfg.Contexts[:0]
			for _, c := range cfg.Contexts {
				if c.Name != args[0] {
					kept = append(kept, c)
				}
			}
			cfg.Contexts = kept
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			return a.contextReport(path, args[0], "removed context "+args[0])
		},
	}
	cmd.AddCommand(list, use, set, remove)
	return cmd
}

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// tokenShaped recognises the tokens people paste where a reference
	// belongs: toolscope's own, GitHub's and GitLab's.
	tokenShaped = regexp.MustCompile(`^(tsat_|gh[pousr]_|github_pat_|glpat-)`)
)

func looksLikeToken(s string) bool { return tokenShaped.MatchString(s) }

func absOrEmpty(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}

func (a *app) contextReport(path, name, human string) error {
	if a.json {
		return json.NewEncoder(a.stdout).Encode(map[string]string{"config": path, "context": name})
	}
	_, err := fmt.Fprintln(a.stdout, human)
	return err
}

func (a *app) emitTable(human func(w io.Writer)) error {
	return a.emit(nil, human)
}
