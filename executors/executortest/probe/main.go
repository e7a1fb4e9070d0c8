// Command probe is the agent of the isolation tests (executortest.
// RunIsolation): a static program a session runs as its agent, which
// tries what a hostile agent would — read agentctl's launch secret (the
// file named on its command line, /proc/<agentctl>/environ, mem and fds),
// read another session's files, and drive agentctl's gRPC API without the
// secret — and reports every outcome, with its own environment, through
// its own session's MCP endpoint (the tool ReportTool), which proves that
// the agent's own MCP token works.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
)

// Environment the test gives the probe (AgentCommand.Env).
const (
	EnvOtherDirs = "PROBE_OTHER_DIRS" // another session's directories, ':'-separated
	EnvOtherID   = "PROBE_OTHER_ID"   // its session id
	EnvPorts     = "PROBE_PORTS"      // ports to call agentctl's API on; empty: every port agentctl's uid listens on
	EnvForbidden = "PROBE_FORBIDDEN"  // more files the agent must not read, ':'-separated
	EnvAPIs      = "PROBE_APIS"       // URLs the agent must not be answered 2xx by, ','-separated (an API server)
	ReportTool   = "probe__report"
)

func main() {
	r := map[string]string{}
	agentctl := os.Getppid()
	proc := func(name string) string { return fmt.Sprintf("/proc/%d/%s", agentctl, name) }
	r["agentctl_pid"] = strconv.Itoa(agentctl)
	r["uid"] = strconv.Itoa(os.Getuid())
	var st syscall.Stat_t
	if syscall.Stat(proc(""), &st) == nil {
		r["agentctl_uid"] = strconv.Itoa(int(st.Uid))
	}
	r["self/environ"] = readAll("/proc/self/environ")
	for _, name := range []string{"environ", "cmdline", "mem", "fd", "root/proc/1/environ", "cwd", "maps", "auxv"} {
		r["agentctl/"+name] = readAll(proc(name))
	}
	r["pid1/environ"] = readAll("/proc/1/environ")
	cmdline := strings.Split(readAll(proc("cmdline")), "\x00")
	for i, a := range cmdline {
		if a == "--secret-file" && i+1 < len(cmdline) {
			r["secret_file"] = readAll(cmdline[i+1])
			r["secret_dir"] = readAll(filepath.Dir(cmdline[i+1]))
		}
	}
	r["secret_file(/toolscope/secret)"] = readAll("/toolscope/secret")
	own := filepath.Dir(os.Getenv("TOOLSCOPE_MCP_CONFIG"))
	r["own/mcp.json"] = okOrErr(readAll(filepath.Join(own, "mcp.json")))
	r["sessions_dir"] = readAll(filepath.Dir(own))
	r["own"], r["tmpdir"], r["home"] = own, os.TempDir(), os.Getenv("HOME")
	if f, err := os.CreateTemp("", "probe-*"); err != nil {
		r["tmp_write"] = "denied: " + err.Error()
	} else {
		r["tmp_write"] = "wrote: " + f.Name()
		_ = f.Close()
	}
	var others []string
	if id := os.Getenv(EnvOtherID); id != "" {
		others = append(others, filepath.Join(filepath.Dir(own), id))
	}
	for _, d := range filepath.SplitList(os.Getenv(EnvOtherDirs)) {
		if d != "" {
			others = append(others, d)
		}
	}
	for i, d := range others {
		r[fmt.Sprintf("other[%d]", i)] = readAll(d)
		for _, f := range []string{"bridge.json", "mcp.json", "agent.log"} {
			r[fmt.Sprintf("other[%d]/%s", i, f)] = readAll(filepath.Join(d, f))
		}
	}
	for i, path := range filepath.SplitList(os.Getenv(EnvForbidden)) {
		r[fmt.Sprintf("forbidden[%d](%s)", i, path)] = readAll(path)
	}
	for _, u := range strings.FieldsFunc(os.Getenv(EnvAPIs), func(r rune) bool { return r == ',' }) {
		r["api["+u+"]"] = get(u)
	}
	ports := strings.FieldsFunc(os.Getenv(EnvPorts), func(r rune) bool { return r == ',' })
	if len(ports) == 0 {
		ports = listeningPorts(int(st.Uid))
	}
	for _, port := range ports {
		r["grpc:"+port] = callAgentctl(net.JoinHostPort("127.0.0.1", port), os.Getenv("TOOLSCOPE_SESSION_ID"), os.Getenv(EnvOtherID))
	}
	if err := report(r); err != nil {
		fmt.Fprintln(os.Stderr, "probe: report:", err)
		os.Exit(1)
	}
}

// readAll reads a file, or lists a directory; "denied: ..." when it could
// not be opened.
func readAll(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return "denied: " + err.Error()
		}
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		return "listed: " + strings.Join(names, ",")
	}
	f, err := os.Open(path)
	if err != nil {
		return "denied: " + err.Error()
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return "opened: " + err.Error() // opened: not denied
	}
	return "read: " + string(b[:n])
}

func okOrErr(s string) string {
	if strings.HasPrefix(s, "read: ") {
		return "read"
	}
	return s
}

// listeningPorts are the TCP ports on which processes of uid listen.
func listeningPorts(uid int) []string {
	var ports []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 8 || fields[3] != "0A" || fields[7] != strconv.Itoa(uid) { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
				ports = append(ports, strconv.FormatUint(p, 10))
			}
		}
		_ = f.Close()
	}
	return ports
}

// callAgentctl tries agentctl's API without the secret: StopSession of
// its own session, then CreateSession under the other session's id.
func callAgentctl(addr, self, other string) string {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "error: " + err.Error()
	}
	defer conn.Close()
	c := agentctlv1.NewAgentctlServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	_, err = c.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: self})
	out = append(out, "stop="+status.Code(err).String())
	forged := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+os.Getenv("TOOLSCOPE_MCP_TOKEN"))
	_, err = c.CreateSession(forged, &agentctlv1.CreateSessionRequest{Spec: &agentctlv1.LaunchSpec{SessionId: other + "-forged", TaskId: "task_forged",
		Mode: agentctlv1.SessionMode_SESSION_MODE_TASK}})
	out = append(out, "create="+status.Code(err).String())
	return strings.Join(out, " ")
}

// get is what an HTTPS GET of url answers ("status N"), or "denied: ..."
// when nothing answers. The server's certificate is not checked: the
// probe wants to know whether the API would serve it, not whom it is.
func get(url string) string {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a probe
	res, err := c.Get(url)
	if err != nil {
		return "denied: " + err.Error()
	}
	defer res.Body.Close()
	return "status " + strconv.Itoa(res.StatusCode)
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// report calls ReportTool on the session's own MCP endpoint.
func report(r map[string]string) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("TOOLSCOPE_MCP_URL"),
		HTTPClient: &http.Client{Transport: bearer{os.Getenv("TOOLSCOPE_MCP_TOKEN")}}}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ReportTool, Arguments: map[string]any{"report": string(b)}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("the report was refused: %v", res.Content)
	}
	return nil
}
