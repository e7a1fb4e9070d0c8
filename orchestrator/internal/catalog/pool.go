package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/version"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// DefaultTimeout bounds one operation (connecting included) when
// Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// ProtocolVersion is the MCP version the pool asks servers for. The
// 2025-11-25 handshake (initialize) is served by every current server;
// under 2026-07-28 the client may answer tools/list from a cache for as
// long as the server's TTL says, and a refresh must see the server's list
// as it is now.
const ProtocolVersion = "2025-11-25"

// Limits on what one discovery accepts; a server beyond them fails
// discovery with a message naming the limit, and keeps its catalog.
const (
	MaxTools           = 1000
	MaxToolNameBytes   = 128
	MaxDescriptionSize = 16 << 10
	MaxSchemaSize      = 256 << 10
)

// DefaultPath is the PATH a stdio server gets unless one of its env
// references sets PATH.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Options configure a Pool.
type Options struct {
	// Timeout bounds each operation, connecting included; DefaultTimeout
	// if zero.
	Timeout time.Duration
	// WorkDir is a stdio server's working directory when its record
	// names none: the orchestrator's data directory.
	WorkDir string
	// Credentials resolves HTTP header references; its Env (os.LookupEnv
	// if nil) also resolves stdio env references.
	Credentials credentials.Resolver
	// TerminateTimeout is how long closing a stdio server waits for it to
	// exit after its stdin is closed, before SIGTERM (and SIGKILL as long
	// again after that); 2 s if zero.
	TerminateTimeout time.Duration
	// Logger receives connection events (never secrets); nil discards.
	Logger *slog.Logger
}

// Pool holds one go-sdk client connection per server. It is safe for
// concurrent use.
type Pool struct {
	opts  Options
	httpT *http.Transport // shared by HTTP servers

	life context.Context // cancelled by Close: ends operations in flight
	stop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	entries map[string]*entry // by server id
	ops     sync.WaitGroup    // operations in flight
	closers sync.WaitGroup    // replaced connections being closed
}

// entry is one server's connection. sem (capacity 1) serializes
// connecting, and guards the fields below it.
type entry struct {
	sem     chan struct{}
	key     string // the transport the connection was made with
	sess    *mcp.ClientSession
	dead    chan struct{} // closed when sess's connection ends
	stderr  *tail
	secrets *scrub.Set
}

// New returns an empty pool.
func New(opts Options) *Pool {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.TerminateTimeout <= 0 {
		opts.TerminateTimeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	life, stop := context.WithCancel(context.Background())
	return &Pool{
		opts: opts, httpT: http.DefaultTransport.(*http.Transport).Clone(),
		life: life, stop: stop, entries: map[string]*entry{},
	}
}

// ErrClosed reports an operation on a closed pool.
var ErrClosed = fmt.Errorf("the catalog's connections are closed (the orchestrator is shutting down): %w", errdefs.ErrUnavailable)

// Close ends every operation in flight, closes every connection and ends
// every stdio server. Later operations fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	entries := p.entries
	p.entries = nil
	p.mu.Unlock()
	p.stop()
	p.ops.Wait()
	for _, e := range entries {
		e.sem <- struct{}{}
		if e.sess != nil {
			p.closeAsync(e.sess)
			e.sess = nil
		}
		<-e.sem
	}
	p.closers.Wait()
	p.httpT.CloseIdleConnections()
	return nil
}

// Forget closes the server's connection, if any; the next operation
// connects again.
func (p *Pool) Forget(serverID string) {
	p.mu.Lock()
	e := p.entries[serverID]
	p.mu.Unlock()
	if e == nil {
		return
	}
	e.sem <- struct{}{}
	if e.sess != nil {
		p.closeAsync(e.sess)
		e.sess = nil
	}
	<-e.sem
}

func (p *Pool) closeAsync(sess *mcp.ClientSession) {
	p.closers.Add(1)
	go func() {
		defer p.closers.Done()
		_ = sess.Close() // a stdio server's exit status is of no interest
	}()
}

// begin starts an operation: bounded by the timeout, ended by Close.
func (p *Pool) begin(ctx context.Context) (context.Context, func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, ErrClosed
	}
	p.ops.Add(1)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	stop := context.AfterFunc(p.life, cancel)
	return ctx, func() { stop(); cancel(); p.ops.Done() }, nil
}

// TestResult is what a server reported to a connection test.
type TestResult struct {
	ServerName    string
	ServerVersion string
	ToolNames     []string // as listed, sorted
}

// Test makes a new connection to the server (not the pooled one),
// lists its tools and closes it. It changes nothing.
func (p *Pool) Test(ctx context.Context, prov model.MCPServer) (TestResult, error) {
	ctx, end, err := p.begin(ctx)
	if err != nil {
		return TestResult{}, err
	}
	defer end()
	secrets := &scrub.Set{}
	c, err := p.connect(ctx, prov, secrets)
	if err != nil {
		return TestResult{}, err
	}
	defer p.closeAsync(c.sess)
	var res TestResult
	if info := c.sess.InitializeResult().ServerInfo; info != nil {
		s := secrets.Scrubber()
		res.ServerName, res.ServerVersion = s.String(info.Name), s.String(info.Version)
	}
	tools, err := listTools(ctx, c.sess)
	if err != nil {
		return TestResult{}, p.failure(ctx, prov, "list tools", err, secrets, c.stderr)
	}
	for _, t := range tools {
		res.ToolNames = append(res.ToolNames, secrets.Scrubber().String(t.Name))
	}
	slices.Sort(res.ToolNames)
	return res, nil
}

// Discover lists every tool of the server (all pages) over the pooled
// connection and returns them with canonical schemas and their hashes.
// A broken connection is replaced and the listing retried once.
func (p *Pool) Discover(ctx context.Context, prov model.MCPServer) ([]model.DiscoveredTool, error) {
	var out []model.DiscoveredTool
	err := p.do(ctx, prov, "list tools", true, func(ctx context.Context, sess *mcp.ClientSession, secrets *scrub.Set) error {
		tools, err := listTools(ctx, sess)
		if err != nil {
			return err
		}
		out, err = discovered(tools, secrets)
		return err
	})
	return out, err
}

// Call calls a server's tool (by its name on the server) over the
// pooled connection. args is a JSON object (empty: no arguments). A tool
// that fails answers with a result whose IsError is set; an error means
// the call could not be made or answered. An answer over MaxMessageBytes
// is not held: the call fails with a *toolapi.ResultTooLargeError, and the
// connection is kept. A call is sent again on a new
// connection only when it cannot have run: the server did not know the
// connection's session. A connection that breaks during a call, and an
// HTTP error answer (go-sdk reports a 5xx or 429 like an unsent request),
// drop the connection without repeating the call, since it may have run.
func (p *Pool) Call(ctx context.Context, prov model.MCPServer, externalName string, args json.RawMessage) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: externalName}
	if len(args) > 0 {
		params.Arguments = args
	}
	var res *mcp.CallToolResult
	err := p.do(ctx, prov, "call "+externalName, false, func(ctx context.Context, sess *mcp.ClientSession, secrets *scrub.Set) error {
		r, err := sess.CallTool(ctx, params)
		if err != nil {
			return err
		}
		res, err = scrubResult(r, secrets)
		return err
	})
	return res, err
}

// do runs op on the server's pooled connection. When op fails because
// the connection broke, the connection is dropped, and op runs once more
// on a new one if retry is set (operations that change nothing) or the
// server did not know the connection's session (the request was refused
// unseen, so it cannot have run).
func (p *Pool) do(ctx context.Context, prov model.MCPServer, what string, retry bool,
	op func(context.Context, *mcp.ClientSession, *scrub.Set) error) error {
	ctx, end, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	for attempt := 0; ; attempt++ {
		e, c, err := p.session(ctx, prov)
		if err != nil {
			return err
		}
		err = op(ctx, c.sess, c.secrets)
		if err == nil {
			return nil
		}
		// go-sdk reports an unsent request and an HTTP 5xx or 429 answer
		// alike (codeRejected): only a missing session proves the server
		// did not run the request.
		unseen := errors.Is(err, mcp.ErrSessionMissing)
		broken := unseen || isRejected(err) || errors.Is(err, mcp.ErrConnectionClosed) || (!isAnswer(err) && ctx.Err() == nil && !isLimit(err))
		if broken {
			p.drop(e, c.sess)
		}
		if !broken || attempt > 0 || !(retry || unseen) {
			return p.failure(ctx, prov, what, err, c.secrets, c.stderr)
		}
		p.opts.Logger.Info("reconnecting to an MCP server", "server", prov.Name, "operation", what)
	}
}

// conn is one pooled connection as an operation uses it: the session and
// what belongs to that connection (its secrets, its stderr), captured
// together under the entry's lock, so a reconnect by another operation
// never mixes one connection's session with another's secrets.
type conn struct {
	sess    *mcp.ClientSession
	secrets *scrub.Set
	stderr  *tail
}

// session returns the server's live pooled connection, connecting (or
// reconnecting, when the transport changed or the connection ended) as
// needed.
func (p *Pool) session(ctx context.Context, prov model.MCPServer) (*entry, conn, error) {
	key, err := transportKey(prov)
	if err != nil {
		return nil, conn{}, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, conn{}, ErrClosed
	}
	e := p.entries[prov.ID]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		p.entries[prov.ID] = e
	}
	p.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, conn{}, p.failure(ctx, prov, "connect", ctx.Err(), nil, nil)
	}
	defer func() { <-e.sem }()
	if e.sess != nil {
		select {
		case <-e.dead:
		default:
			if e.key == key {
				return e, conn{e.sess, e.secrets, e.stderr}, nil
			}
		}
		p.closeAsync(e.sess)
		e.sess = nil
	}
	secrets := &scrub.Set{}
	c, err := p.connect(ctx, prov, secrets)
	if err != nil {
		return nil, conn{}, err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.closeAsync(c.sess)
		return nil, conn{}, ErrClosed
	}
	e.key, e.sess, e.dead, e.stderr, e.secrets = key, c.sess, make(chan struct{}), c.stderr, secrets
	go func(sess *mcp.ClientSession, dead chan struct{}) {
		_ = sess.Wait()
		close(dead)
	}(c.sess, e.dead)
	p.opts.Logger.Info("connected to an MCP server", "server", prov.Name, "transport", string(prov.Transport))
	return e, conn{c.sess, secrets, c.stderr}, nil
}

// drop closes sess if it is still the entry's connection.
func (p *Pool) drop(e *entry, sess *mcp.ClientSession) {
	e.sem <- struct{}{}
	if e.sess == sess {
		e.sess = nil
		p.closeAsync(sess)
	}
	<-e.sem
}

// cloneTransport returns prov with its own copies of the transport's
// slices.
func cloneTransport(prov model.MCPServer) model.MCPServer {
	if prov.Stdio != nil {
		s := *prov.Stdio
		s.Args, s.Env = slices.Clone(s.Args), slices.Clone(s.Env)
		prov.Stdio = &s
	}
	if prov.HTTP != nil {
		h := *prov.HTTP
		h.Headers = slices.Clone(h.Headers)
		prov.HTTP = &h
	}
	return prov
}

func transportKey(prov model.MCPServer) (string, error) {
	b, err := json.Marshal(struct {
		T     model.TransportKind
		Stdio *model.StdioTransport
		HTTP  *model.HTTPTransport
	}{prov.Transport, prov.Stdio, prov.HTTP})
	return string(b), err
}

type connection struct {
	sess   *mcp.ClientSession
	stderr *tail
}

// connect makes a new client connection to the server. Resolved secrets
// are added to secrets, so that errors and answers can be scrubbed.
func (p *Pool) connect(ctx context.Context, prov model.MCPServer, secrets *scrub.Set) (connection, error) {
	prov = cloneTransport(prov) // the connection outlives the caller's value
	client := mcp.NewClient(&mcp.Implementation{Name: "toolscope", Version: version.String()}, nil)
	var (
		transport mcp.Transport
		c         connection
	)
	switch {
	case prov.Transport == model.TransportStdio && prov.Stdio != nil:
		cmd, err := p.command(prov, secrets)
		if err != nil {
			return c, err
		}
		c.stderr = &tail{max: 4 << 10}
		cmd.Stderr = c.stderr
		transport = &stdioTransport{cmd: cmd, terminate: p.opts.TerminateTimeout}
	case prov.Transport == model.TransportHTTP && prov.HTTP != nil:
		// Resolve once now, for a precise error before any request.
		for _, h := range prov.HTTP.Headers {
			v, err := p.opts.Credentials.Resolve(h.Value)
			if err != nil {
				return c, errdefs.FailedPrecondition("MCP server %q: header %s: %v", prov.Name, h.Name, err)
			}
			secrets.Add(v)
		}
		transport = &mcp.StreamableClientTransport{
			Endpoint: prov.HTTP.URL,
			HTTPClient: &http.Client{Transport: &boundedTransport{max: MaxMessageBytes, base: &headerTransport{
				base: p.httpT, headers: prov.HTTP.Headers, creds: p.opts.Credentials, secrets: secrets,
			}}},
			DisableStandaloneSSE: true, // the pool needs no server-initiated messages
			// boundedTransport bounds the events of an answer to a call;
			// this bounds any other stream's (a resumed one's) as well.
			MaxEventSize: MaxMessageBytes + 64<<10,
		}
	default:
		return c, errdefs.FailedPrecondition("MCP server %q has no %s transport", prov.Name, prov.Transport)
	}
	sess, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		return c, p.failure(ctx, prov, "connect", err, secrets, c.stderr)
	}
	c.sess = sess
	return c, nil
}

// command builds a stdio server's process: its environment holds only
// PATH, HOME and its references, resolved now.
func (p *Pool) command(prov model.MCPServer, secrets *scrub.Set) (*exec.Cmd, error) {
	lookup := p.opts.Credentials.Env
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s := prov.Stdio
	env := map[string]string{"PATH": DefaultPath}
	if home, ok := lookup("HOME"); ok && home != "" {
		env["HOME"] = home
	}
	for _, ref := range s.Env {
		v, ok := lookup(ref.FromEnv)
		if !ok {
			return nil, errdefs.FailedPrecondition("MCP server %q: environment variable %s (the server's %s) is not set in the orchestrator's environment",
				prov.Name, ref.FromEnv, ref.Name)
		}
		env[ref.Name] = v
		secrets.Add(v)
	}
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Dir = s.WorkingDir
	if cmd.Dir == "" {
		cmd.Dir = p.opts.WorkDir
	}
	if _, ok := env["HOME"]; !ok && cmd.Dir != "" {
		env["HOME"] = cmd.Dir
	}
	cmd.Env = make([]string, 0, len(env))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	slices.Sort(cmd.Env)
	return cmd, nil
}

// failure turns an operation's error into an errdefs error that names the
// server and never carries a resolved secret: the original error is not
// wrapped, only its scrubbed text is kept.
func (p *Pool) failure(ctx context.Context, prov model.MCPServer, what string, err error, secrets *scrub.Set, stderr *tail) error {
	var rpcErr *jsonrpc.Error
	class := errdefs.ErrUnavailable
	msg := err.Error()
	switch big := asTooLarge(err); {
	case big != nil:
		// The pool's own answer in place of one over the bound (see
		// boundedTransport, boundedLines).
		return fmt.Errorf("MCP server %q: %s: %w; the pool reads at most %d bytes of one message: %w",
			prov.Name, what, big, MaxMessageBytes, errdefs.ErrResourceExhausted)
	case errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrUnavailable), errors.Is(err, errdefs.ErrInvalidArgument):
		return err // already ours, and secret-free
	case isLimit(err):
		class = errdefs.ErrFailedPrecondition
	case p.life.Err() != nil:
		return ErrClosed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		msg = fmt.Sprintf("no answer within %s", p.opts.Timeout)
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
		msg = "the connection broke: " + msg
	case isRejected(err):
		msg = "the request could not be sent: " + msg
	case errors.As(err, &rpcErr):
		class = errdefs.ErrFailedPrecondition
		msg = fmt.Sprintf("the server answered with error %d: %s", rpcErr.Code, rpcErr.Message)
	}
	msg = secrets.Scrubber().String(msg)
	if out := secrets.Scrubber().Tail(stderr.String(), 512); out != "" {
		msg += "; its stderr ends with: " + out
	}
	return fmt.Errorf("MCP server %q: %s: %s: %w", prov.Name, what, msg, class)
}

// listTools lists every page of the server's tools.
func listTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(tools) == MaxTools {
			return nil, limitError{fmt.Sprintf("the server lists more than %d tools", MaxTools)}
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// codeRejected is the go-sdk's JSON-RPC code for a request its transport
// could not send (the HTTP request failed before reaching the server).
const codeRejected = -32005

func isRejected(err error) bool {
	var rpcErr *jsonrpc.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == codeRejected
}

// isAnswer reports whether err is the server's JSON-RPC error answer.
func isAnswer(err error) bool {
	var rpcErr *jsonrpc.Error
	return errors.As(err, &rpcErr) && !isRejected(err)
}

type limitError struct{ msg string }

func (e limitError) Error() string { return e.msg }

func isLimit(err error) bool {
	var l limitError
	return errors.As(err, &l)
}

// discovered converts a tools/list answer into catalog input: canonical
// schemas and their hash, the title from the tool or its annotations, the
// read-only hint; secrets scrubbed.
func discovered(tools []*mcp.Tool, secrets *scrub.Set) ([]model.DiscoveredTool, error) {
	out := make([]model.DiscoveredTool, 0, len(tools))
	for _, t := range tools {
		name := t.Name
		switch {
		case name == "":
			return nil, limitError{"the server lists a tool without a name"}
		case len(name) > MaxToolNameBytes || !utf8.ValidString(name) || strings.ContainsFunc(name, isControl):
			return nil, limitError{fmt.Sprintf("the server lists a tool whose name is not valid (over %d bytes, not UTF-8 or with control characters)", MaxToolNameBytes)}
		case len(t.Description) > MaxDescriptionSize:
			return nil, limitError{fmt.Sprintf("tool %q has a description over %d bytes", name, MaxDescriptionSize)}
		}
		d := model.DiscoveredTool{Name: name, Title: t.Title, Description: t.Description}
		if d.Title == "" && t.Annotations != nil {
			d.Title = t.Annotations.Title
		}
		if t.Annotations != nil {
			d.ReadOnly = t.Annotations.ReadOnlyHint
		}
		input := any(map[string]any{"type": "object"})
		if t.InputSchema != nil {
			input = t.InputSchema
		}
		var err error
		if d.InputSchema, err = CanonicalValue(input); err != nil {
			return nil, limitError{fmt.Sprintf("tool %q has an input schema that is not JSON", name)}
		}
		if t.OutputSchema != nil {
			if d.OutputSchema, err = CanonicalValue(t.OutputSchema); err != nil {
				return nil, limitError{fmt.Sprintf("tool %q has an output schema that is not JSON", name)}
			}
		}
		if len(d.InputSchema)+len(d.OutputSchema) > MaxSchemaSize {
			return nil, limitError{fmt.Sprintf("tool %q has schemas over %d bytes", name, MaxSchemaSize)}
		}
		s := secrets.Scrubber()
		d.Title, d.Description = s.String(d.Title), s.String(d.Description)
		if d.InputSchema, err = canonicalScrubbed(s, d.InputSchema); err != nil {
			return nil, err
		}
		if d.OutputSchema, err = canonicalScrubbed(s, d.OutputSchema); err != nil {
			return nil, err
		}
		d.SchemaHash = SchemaHash(d.InputSchema, d.OutputSchema)
		out = append(out, d)
	}
	return out, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// canonicalScrubbed returns a canonical schema scrubbed, and canonical
// again if scrubbing changed it.
func canonicalScrubbed(s *scrub.Scrubber, schema json.RawMessage) (json.RawMessage, error) {
	clean := s.JSON(schema)
	if len(clean) == 0 || string(clean) == string(schema) {
		return schema, nil
	}
	return Canonical(clean)
}

// scrubResult returns r with every resolved secret replaced.
func scrubResult(r *mcp.CallToolResult, secrets *scrub.Set) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	clean := secrets.Scrubber().JSON(b)
	if string(clean) == string(b) {
		return r, nil
	}
	var out mcp.CallToolResult
	if err := json.Unmarshal(clean, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// headerTransport sets a server's headers from their references on
// every request; the secrets live only in the outgoing request.
type headerTransport struct {
	base    http.RoundTripper
	headers []model.HeaderReference
	creds   credentials.Resolver
	secrets *scrub.Set
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) == 0 {
		return h.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for _, ref := range h.headers {
		v, err := h.creds.Resolve(ref.Value)
		if err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, fmt.Errorf("header %s: %v", ref.Name, err)
		}
		h.secrets.Add(v)
		r.Header.Set(ref.Name, ref.Prefix+v)
	}
	return h.base.RoundTrip(r)
}

// tail keeps the last max bytes written to it: a stdio server's stderr,
// for error messages.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns what the buffer holds, trimmed; failure scrubs and cuts
// it (scrub.Scrubber.Tail).
func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
