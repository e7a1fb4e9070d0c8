package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
)

// The governed catalog of external MCP servers: `toolscope mcp-server
// ...` (deprecated name `provider`) and `toolscope tool ...`
// (docs/catalog.md).

func (a *app) catalog(conn *grpc.ClientConn) pb.CatalogServiceClient {
	return pb.NewCatalogServiceClient(conn)
}

// transportFlags are the flags that describe an MCP server's transport,
// for `mcp-server add` and `mcp-server update`.
type transportFlags struct {
	stdio   string
	args    []string
	workdir string
	env     []string
	url     string
	headers []string
}

func (f *transportFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.stdio, "stdio", "", "absolute path of the server program, run by the orchestrator over stdio")
	fl.StringArrayVar(&f.args, "arg", nil, "an argument of the program; repeat for several, in order")
	fl.StringVar(&f.workdir, "workdir", "", "absolute working directory of the program (default: the orchestrator's data directory)")
	fl.StringArrayVar(&f.env, "env", nil,
		"NAME=FROM_ENV: the program's variable NAME is read from the orchestrator's variable FROM_ENV when it starts; NAME alone reads the same name; repeat")
	fl.StringVar(&f.url, "url", "", "absolute http(s) URL of a streamable HTTP MCP server")
	mapFields(cmd, "server.name", "NAME", "server.stdio.command", "--stdio", "server.stdio.args", "--arg",
		"server.stdio.working_dir", "--workdir", "server.stdio.env", "--env", "server.http.url", "--url", "server.http.headers", "--header")
	fl.StringArrayVar(&f.headers, "header", nil,
		"'Name: [PREFIX ]env:VAR' or 'Name: [PREFIX ]file:/path': a request header from a secret reference, e.g. 'Authorization: Bearer env:DOCS_TOKEN'; repeat")
}

var headerRef = regexp.MustCompile(`^(.*?)(env|file):(.*)$`)

// server returns the MCP server the flags describe. A header value is
// never echoed in an error: it may be the secret itself.
func (f *transportFlags) server(name string) (*pb.McpServer, error) {
	p := &pb.McpServer{Name: name}
	switch {
	case f.stdio != "" && f.url != "":
		return nil, Usagef("give --stdio or --url, not both")
	case f.stdio != "":
		if len(f.headers) > 0 {
			return nil, Usagef("--header is for --url servers; give a stdio program its secrets with --env")
		}
		s := &pb.StdioTransport{Command: f.stdio, Args: f.args, WorkingDir: f.workdir}
		for _, e := range f.env {
			name, from, found := strings.Cut(e, "=")
			if !found {
				from = name
			}
			s.Env = append(s.Env, &pb.EnvReference{Name: name, FromEnv: from})
		}
		p.Transport = &pb.McpServer_Stdio{Stdio: s}
	case f.url != "":
		if len(f.args) > 0 || f.workdir != "" || len(f.env) > 0 {
			return nil, Usagef("--arg, --workdir and --env are for --stdio servers")
		}
		h := &pb.HttpTransport{Url: f.url}
		for i, raw := range f.headers {
			name, value, found := strings.Cut(raw, ":")
			m := headerRef.FindStringSubmatch(strings.TrimLeft(value, " \t"))
			if !found || m == nil || (m[1] != "" && !strings.HasSuffix(m[1], " ")) || m[3] == "" {
				return nil, Usagef("--header #%d is not 'Name: [PREFIX ]env:VAR' or 'Name: [PREFIX ]file:/path' (the value is not shown): "+
					"header values are references to where the secret lives, never the secret", i+1)
			}
			ref := &pb.HeaderReference{Name: strings.TrimSpace(name), Prefix: m[1], Value: &pb.CredentialRef{}}
			if m[2] == "env" {
				ref.Value.Source = &pb.CredentialRef_EnvVar{EnvVar: m[3]}
			} else {
				ref.Value.Source = &pb.CredentialRef_FilePath{FilePath: m[3]}
			}
			h.Headers = append(h.Headers, ref)
		}
		p.Transport = &pb.McpServer_Http{Http: h}
	default:
		return nil, Usagef("give --stdio PROGRAM or --url URL: how the orchestrator reaches the server")
	}
	return p, nil
}

const transportHelp = `A stdio server is a program the orchestrator runs on its own host and keeps
running (one process, reused for every discovery and call). Its environment is
only PATH, HOME and the variables given with --env, each read from the
orchestrator's environment when the program starts: --env API_KEY=DOCS_API_KEY
gives the program API_KEY with the value of the orchestrator's DOCS_API_KEY.

An HTTP server is a streamable HTTP MCP server. Its headers are references,
resolved at each request: --header 'Authorization: Bearer env:DOCS_TOKEN' sends
"Bearer " followed by the orchestrator's DOCS_TOKEN; --header 'X-Key: file:/run/secrets/key'
sends the content of that file. Secrets themselves are never given to toolscope.`

// deprecatedMCPServerCmd is `mcp-server` under its old name, `provider`:
// the same commands (built by mcpServerCmd), hidden, each saying on
// stderr that the name goes in the next release (ADR 0017).
func (a *app) deprecatedMCPServerCmd() *cobra.Command {
	cmd := a.mcpServerCmd()
	cmd.Use, cmd.Hidden = "provider", true
	cmd.Short = "Deprecated: use 'toolscope mcp-server'"
	cmd.PersistentPreRun = func(*cobra.Command, []string) {
		fmt.Fprintln(a.stderr, "toolscope: 'provider' is deprecated and will be removed in the next release; use 'toolscope mcp-server'")
	}
	return cmd
}

func (a *app) mcpServerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp-server",
		Short: "Manage external MCP servers (the governed catalog)",
		Long: `An external MCP server whose tools agents may use, under the administrator's
control: a server is recorded disabled, its tools are discovered disabled,
and a tool reaches a workspace's sessions only when the server and the tool
are enabled, the tool is available and it is assigned to the workspace
('toolscope tool ...'). See docs/catalog.md.

"toolscope provider ..." is the deprecated name of these commands: it works for
this release and says so on stderr; it is removed in the next.`,
	}
	var addFlags transportFlags
	add := &cobra.Command{
		Use:   "add NAME (--stdio PROGRAM [--arg A]... [--workdir DIR] [--env NAME=FROM_ENV]... | --url URL [--header 'Name: [PREFIX ]env:VAR']...)",
		Short: "Record an MCP server (disabled) and discover its tools",
		Long: `Record an MCP server, disabled, and discover its tools (all disabled). NAME is 1
to 32 lower-case letters, digits and -; agents see its tools as NAME__TOOL. A
failed discovery does not refuse the server: it is recorded, and
'toolscope mcp-server refresh NAME' tries again.

` + transportHelp,
		Args: ExactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := addFlags.server(args[0])
			if err != nil {
				return err
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).CreateMcpServer(ctx, &pb.CreateMcpServerRequest{Server: p})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printDiscovery(w, resp.GetServer(), resp.GetCounts()) })
			})
		},
	}
	addFlags.register(add)
	var updateFlags transportFlags
	update := &cobra.Command{
		Use:   "update SERVER (--stdio PROGRAM ... | --url URL ...)",
		Short: "Replace an MCP server's transport and discover its tools again",
		Long: `Replace an MCP server's transport (all of it: give every flag again) and discover
its tools over the new one. The name, the enablement and the catalog stay.

` + transportHelp,
		Args: ExactArgs("SERVER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := updateFlags.server("")
			if err != nil {
				return err
			}
			p.Id = args[0]
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).UpdateMcpServer(ctx, &pb.UpdateMcpServerRequest{Server: p})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printDiscovery(w, resp.GetServer(), resp.GetCounts()) })
			})
		},
	}
	updateFlags.register(update)
	test := &cobra.Command{
		Use: "test SERVER", Short: "Connect to an MCP server and list its tools, changing nothing", Args: ExactArgs("SERVER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).TestMcpServer(ctx, &pb.TestMcpServerRequest{Server: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintf(w, "connected to %s %s\n", orDash(resp.GetServerName()), resp.GetServerVersion())
					fmt.Fprintf(w, "it lists %d tools\t%s\n", len(resp.GetToolNames()), orDash(strings.Join(resp.GetToolNames(), ", ")))
				})
			})
		},
	}
	refresh := &cobra.Command{
		Use: "refresh SERVER", Short: "Discover an MCP server's tools again and show what changed", Args: ExactArgs("SERVER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).RefreshMcpServer(ctx, &pb.RefreshMcpServerRequest{Server: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printDiscovery(w, resp.GetServer(), resp.GetCounts()) })
			})
		},
	}
	get := &cobra.Command{
		Use: "get SERVER", Short: "Show an MCP server: its transport, references and last discovery", Args: ExactArgs("SERVER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).GetMcpServer(ctx, &pb.GetMcpServerRequest{Server: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printMCPServer(w, resp.GetServer()) })
			})
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "List the MCP servers", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).ListMcpServers(ctx, &pb.ListMcpServersRequest{})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintln(w, "NAME\tID\tENABLED\tTRANSPORT\tLAST DISCOVERY")
					for _, p := range resp.GetServers() {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.GetName(), p.GetId(), yesNo(p.GetEnabled()), transportSummary(p), discoverySummary(p))
					}
				})
			})
		},
	}
	setEnabled := func(use, short string, enabled bool) *cobra.Command {
		return &cobra.Command{
			Use: use + " SERVER", Short: short, Args: ExactArgs("SERVER"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
					resp, err := a.catalog(conn).SetMcpServerEnabled(ctx, &pb.SetMcpServerEnabledRequest{Server: args[0], Enabled: enabled})
					if err != nil {
						return err
					}
					return a.emit(resp, func(w io.Writer) { printMCPServer(w, resp.GetServer()) })
				})
			},
		}
	}
	cmd.AddCommand(add, update, test, refresh, get, list,
		setEnabled("enable", "Enable an MCP server: its enabled, assigned, available tools reach sessions", true),
		setEnabled("disable", "Disable an MCP server: none of its tools reach sessions or can be called", false))
	return cmd
}

func (a *app) toolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tool",
		Short: "Manage the catalog's tools: enable, disable, assign to workspaces",
		Long: `The tools discovered on external MCP servers. A tool reaches the sessions of
a workspace only when it is enabled, available (its server's last discovery
listed it), its server is enabled, and it is assigned to the workspace. TOOL
is a tool id or its exposed name (SERVER__NAME).`,
	}
	var server, provider string
	list := &cobra.Command{
		Use: "list [--mcp-server SERVER]", Short: "List the catalog's tools", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if provider != "" {
				fmt.Fprintln(a.stderr, "toolscope: --provider is deprecated and will be removed in the next release; use --mcp-server")
				if server == "" {
					server = provider
				}
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).ListCatalogTools(ctx, &pb.ListCatalogToolsRequest{Server: server})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintln(w, "TOOL\tENABLED\tAVAILABLE\tREAD-ONLY\tWORKSPACES\tDESCRIPTION")
					for _, t := range resp.GetTools() {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.GetExposedName(), yesNo(t.GetEnabled()), yesNo(t.GetAvailable()),
							yesNo(t.GetReadOnly()), orDash(strings.Join(t.GetWorkspaceIds(), ",")), oneLine(t.GetDescription(), 60))
					}
				})
			})
		},
	}
	list.Flags().StringVar(&server, "mcp-server", "", "only this MCP server's tools (name or id)")
	list.Flags().StringVar(&provider, "provider", "", "deprecated: --mcp-server")
	_ = list.Flags().MarkHidden("provider")
	show := &cobra.Command{
		Use: "show TOOL", Short: "Show a tool with its schemas", Args: ExactArgs("TOOL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).GetCatalogTool(ctx, &pb.GetCatalogToolRequest{Tool: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printCatalogTool(w, resp.GetTool()) })
			})
		},
	}
	setEnabled := func(use, short string, enabled bool) *cobra.Command {
		return &cobra.Command{
			Use: use + " TOOL", Short: short, Args: ExactArgs("TOOL"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
					resp, err := a.catalog(conn).SetCatalogToolEnabled(ctx, &pb.SetCatalogToolEnabledRequest{Tool: args[0], Enabled: enabled})
					if err != nil {
						return err
					}
					return a.emit(resp, func(w io.Writer) { printCatalogToolLine(w, resp.GetTool()) })
				})
			},
		}
	}
	var workspace string
	var remove bool
	assign := &cobra.Command{
		Use:   "assign TOOL --workspace WORKSPACE [--remove]",
		Short: "Let a workspace's sessions see a tool, or stop it with --remove",
		Args:  ExactArgs("TOOL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.catalog(conn).AssignCatalogTool(ctx, &pb.AssignCatalogToolRequest{Tool: args[0], WorkspaceId: workspace, Assigned: !remove})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printCatalogToolLine(w, resp.GetTool()) })
			})
		},
	}
	assign.Flags().StringVar(&workspace, "workspace", "", "workspace id")
	assign.Flags().BoolVar(&remove, "remove", false, "remove the assignment instead")
	cmd.AddCommand(list, show,
		setEnabled("enable", "Enable a tool (it reaches sessions when also available, assigned and its server enabled)", true),
		setEnabled("disable", "Disable a tool: live sessions lose it and calls to it are refused", false),
		assign)
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// oneLine returns s on one line, cut to max runes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return orDash(s)
}

func credentialRef(c *pb.CredentialRef) string {
	if f := c.GetFilePath(); f != "" {
		return "file:" + f
	}
	return "env:" + c.GetEnvVar()
}

func transportSummary(p *pb.McpServer) string {
	if s := p.GetStdio(); s != nil {
		return "stdio " + strings.Join(append([]string{s.GetCommand()}, s.GetArgs()...), " ")
	}
	return "http " + p.GetHttp().GetUrl()
}

func discoverySummary(p *pb.McpServer) string {
	when := "never"
	if p.GetDiscoverTime() != nil {
		when = p.GetDiscoverTime().AsTime().Local().Format("2006-01-02 15:04:05")
	}
	if p.GetDiscoveryError() != "" {
		return when + "; then FAILED: " + p.GetDiscoveryError()
	}
	return when
}

func printMCPServer(w io.Writer, p *pb.McpServer) {
	fmt.Fprintf(w, "mcp server\t%s\t%s\n", p.GetName(), p.GetId())
	fmt.Fprintf(w, "  enabled\t%s\n", yesNo(p.GetEnabled()))
	if s := p.GetStdio(); s != nil {
		fmt.Fprintf(w, "  stdio\t%s\n", strings.Join(append([]string{s.GetCommand()}, s.GetArgs()...), " "))
		fmt.Fprintf(w, "  working dir\t%s\n", orDash(s.GetWorkingDir()))
		for _, e := range s.GetEnv() {
			fmt.Fprintf(w, "  env\t%s from the orchestrator's %s\n", e.GetName(), e.GetFromEnv())
		}
	} else {
		fmt.Fprintf(w, "  http\t%s\n", p.GetHttp().GetUrl())
		for _, h := range p.GetHttp().GetHeaders() {
			fmt.Fprintf(w, "  header\t%s: %q + secret from %s\n", h.GetName(), h.GetPrefix(), credentialRef(h.GetValue()))
		}
	}
	fmt.Fprintf(w, "  last discovery\t%s\n", discoverySummary(p))
}

func printDiscovery(w io.Writer, p *pb.McpServer, c *pb.DiscoveryCounts) {
	printMCPServer(w, p)
	if p.GetDiscoveryError() != "" {
		fmt.Fprintf(w, "discovery failed; the catalog is unchanged ('toolscope mcp-server refresh %s' tries again)\n", p.GetName())
		return
	}
	fmt.Fprintf(w, "discovered %d tools\t%d new, %d changed, %d unchanged, %d unavailable, %d restored\n",
		c.GetTotal(), c.GetNew(), c.GetChanged(), c.GetUnchanged(), c.GetUnavailable(), c.GetRestored())
	if c.GetNew() > 0 {
		fmt.Fprintf(w, "new tools are disabled: 'toolscope tool list --mcp-server %s', then 'toolscope tool enable' and 'toolscope tool assign'\n", p.GetName())
	}
}

func printCatalogToolLine(w io.Writer, t *pb.CatalogTool) {
	fmt.Fprintf(w, "tool\t%s\tenabled %s\tavailable %s\tworkspaces %s\n", t.GetExposedName(), yesNo(t.GetEnabled()),
		yesNo(t.GetAvailable()), orDash(strings.Join(t.GetWorkspaceIds(), ",")))
}

func printCatalogTool(w io.Writer, t *pb.CatalogTool) {
	fmt.Fprintf(w, "tool\t%s\t%s\n", t.GetExposedName(), t.GetId())
	fmt.Fprintf(w, "  mcp server\t%s\n", t.GetServerId())
	fmt.Fprintf(w, "  name on the server\t%s\n", t.GetExternalName())
	fmt.Fprintf(w, "  title\t%s\n", orDash(t.GetTitle()))
	fmt.Fprintf(w, "  description\t%s\n", oneLine(t.GetDescription(), 200))
	fmt.Fprintf(w, "  enabled\t%s\n", yesNo(t.GetEnabled()))
	fmt.Fprintf(w, "  available\t%s\n", yesNo(t.GetAvailable()))
	fmt.Fprintf(w, "  read-only\t%s\n", yesNo(t.GetReadOnly()))
	fmt.Fprintf(w, "  workspaces\t%s\n", orDash(strings.Join(t.GetWorkspaceIds(), ",")))
	fmt.Fprintf(w, "  first seen\t%s\n", t.GetFirstSeenTime().AsTime().Local().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(w, "  last seen\t%s\n", t.GetLastSeenTime().AsTime().Local().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(w, "  schema hash\t%s\n", t.GetSchemaHash())
	fmt.Fprintf(w, "  input schema\t%s\n", indentJSON(t.GetInputSchemaJson()))
	if t.GetOutputSchemaJson() != "" {
		fmt.Fprintf(w, "  output schema\t%s\n", indentJSON(t.GetOutputSchemaJson()))
	}
}

// indentJSON indents a JSON document for the human output; it keeps
// anything else as it is.
func indentJSON(doc string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(doc), "    ", "  "); err != nil {
		return doc
	}
	return buf.String()
}
