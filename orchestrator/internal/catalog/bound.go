package catalog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// MaxMessageBytes bounds one message a catalog server sends the pool, as
// it arrives (JSON-RPC, in an HTTP body, an SSE event or a stdio line). It
// is a little over toolapi.MaxResultBytes: a result within that bound fits
// with room for its JSON escaping and the JSON-RPC envelope; a larger one
// could not be forwarded anyway. The pool never holds more of one message:
// a message over it is read no further (HTTP) or read past without being
// kept (stdio), and the call it answers fails with a
// toolapi.ResultTooLargeError, the connection kept. So a call's memory is
// bounded however large the server's answer, and so is that of many such
// calls at once. It bounds every message, a tools/list page too: a
// catalog that size could not be pushed to an agentctl either, since
// surfaces travel on the same 4 MiB link.
const MaxMessageBytes = toolapi.MaxResultBytes + 1<<20

// codeTooLarge is the JSON-RPC error code of the answer the pool puts in
// place of a message over MaxMessageBytes; its data says so too
// (tooLargeData), so a server's own error of that code is not taken for
// it.
const codeTooLarge = -32091

type tooLargeData struct {
	Toolscope string `json:"toolscope"`
	Bytes     int64  `json:"bytes"`
	More      bool   `json:"more,omitempty"`
}

const tooLargeMark = "result_too_large"

// tooLargeAnswer is the JSON-RPC error answer to request id that stands
// for an answer of n bytes (more: at least) the pool did not keep.
func tooLargeAnswer(id json.RawMessage, n int64, more bool) []byte {
	data, _ := json.Marshal(tooLargeData{Toolscope: tooLargeMark, Bytes: n, More: more})
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: codeTooLarge, Message: fmt.Sprintf("the answer is over %d bytes", MaxMessageBytes), Data: data}})
	return b
}

// asTooLarge returns the size the pool's stand-in answer reports, if err
// is one.
func asTooLarge(err error) *toolapi.ResultTooLargeError {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != codeTooLarge {
		return nil
	}
	var data tooLargeData
	if json.Unmarshal(rpcErr.Data, &data) != nil || data.Toolscope != tooLargeMark {
		return nil
	}
	return &toolapi.ResultTooLargeError{Bytes: data.Bytes, More: data.More}
}

// boundedTransport bounds the bodies of an HTTP server's answers. An
// answer to a request (a JSON-RPC call) is read one message at a time, up
// to MaxMessageBytes: a JSON body whole, an event stream event by event.
// A message over the bound is not read further; in its place the client
// reads the pool's error answer to the call (tooLargeAnswer), so the call
// fails and the connection carries on. Other bodies (an HTTP error's) are
// cut at the bound, but for an event stream that answers no call (see
// RoundTrip).
type boundedTransport struct {
	base http.RoundTripper
	max  int
}

func (b *boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(r)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body = &capped{r: io.LimitReader(resp.Body, int64(b.max)), c: resp.Body}
		return resp, nil
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	id := callID(r)
	switch {
	case id == nil && media == "text/event-stream":
		// A stream that answers no request of ours (a call's stream
		// resumed): bounded by the client an event at a time
		// (StreamableClientTransport.MaxEventSize), not cut as a whole.
		return resp, nil
	case id == nil:
		resp.Body = &capped{r: io.LimitReader(resp.Body, int64(b.max)), c: resp.Body}
		return resp, nil
	}
	switch media {
	case "application/json":
		if resp.ContentLength > int64(b.max) {
			// Announced over the bound: not read at all.
			_ = resp.Body.Close()
			body := tooLargeAnswer(id, resp.ContentLength, false)
			resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			resp.Header.Del("Content-Length")
			return resp, nil
		}
		resp.Body = &jsonBody{body: resp.Body, id: id, max: b.max}
	case "text/event-stream":
		resp.Body = &eventBody{body: resp.Body, br: bufio.NewReaderSize(resp.Body, readSize), id: id, max: b.max}
	default:
		resp.Body = &capped{r: io.LimitReader(resp.Body, int64(b.max)), c: resp.Body}
	}
	return resp, nil
}

// callID returns the JSON-RPC id of the call r sends, or nil for a
// notification, an answer or a body it cannot read again.
func callID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(body).Decode(&msg) != nil || msg.Method == "" || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return nil
	}
	return msg.ID
}

// capped is a body read up to a bound, closed as the original.
type capped struct {
	r io.Reader
	c io.Closer
}

func (c *capped) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *capped) Close() error               { return c.c.Close() }

// jsonBody is a JSON answer read whole up to max bytes, at the first
// Read (not in RoundTrip, so that a slow body never holds up the
// client's writes); over max, the error answer is read instead.
type jsonBody struct {
	body io.ReadCloser
	id   json.RawMessage
	max  int
	r    io.Reader
}

func (j *jsonBody) Read(p []byte) (int, error) {
	if j.r == nil {
		buf, err := io.ReadAll(io.LimitReader(j.body, int64(j.max)+1))
		switch {
		case len(buf) > j.max:
			_ = j.body.Close()
			j.r = bytes.NewReader(tooLargeAnswer(j.id, int64(j.max), true))
		case err != nil:
			j.r = io.MultiReader(bytes.NewReader(buf), errReader{err})
		default:
			j.r = bytes.NewReader(buf)
		}
	}
	return j.r.Read(p)
}

func (j *jsonBody) Close() error { return j.body.Close() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// eventBody is an SSE answer handed on an event at a time, each once it
// is complete (as the client's scanner would hold it anyway), so an
// event over max is never handed on in part: it ends the stream with an
// event holding the error answer to the call.
type eventBody struct {
	body  io.ReadCloser
	br    *bufio.Reader
	id    json.RawMessage
	max   int
	event []byte // the event being read
	line  int    // where its current line starts
	out   []byte // what Read hands on next
	err   error  // once out is handed on
}

func (e *eventBody) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		e.next()
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// next reads a line, or the part of one the reader's buffer holds.
func (e *eventBody) next() {
	frag, err := e.br.ReadSlice('\n')
	e.event = grow(e.event, frag, e.max)
	switch {
	case len(e.event) > e.max:
		e.event = nil
		_ = e.body.Close()
		e.out = append(append([]byte("event: message\ndata: "), tooLargeAnswer(e.id, int64(e.max), true)...), "\n\n"...)
		e.err = io.EOF
	case errors.Is(err, bufio.ErrBufferFull):
	case err != nil:
		e.out, e.event, e.err = e.event, nil, err
	case len(bytes.TrimRight(e.event[e.line:], "\r\n")) == 0:
		// A blank line ends the event.
		e.out, e.event, e.line = e.event, nil, 0
	default:
		e.line = len(e.event)
	}
}

func (e *eventBody) Close() error { return e.body.Close() }

// readSize is the read buffer of a stream read a message at a time.
const readSize = 64 << 10

// grow appends frag to buf, a message being read that is held up to max
// bytes: doubling its capacity (append grows a large slice by a quarter,
// which would allocate five times what it ends up holding), never much
// beyond max.
func grow(buf, frag []byte, bound int) []byte {
	if need := len(buf) + len(frag); need > cap(buf) {
		n := max(min(2*cap(buf), bound+readSize), need, 4<<10)
		b := make([]byte, len(buf), n)
		copy(b, buf)
		buf = b
	}
	return append(buf, frag...)
}

// stdioTransport runs a stdio server's command and talks to it as
// mcp.CommandTransport does (newline-delimited JSON over its stdin and
// stdout; closing closes its stdin, then after terminate sends SIGTERM,
// then after terminate again SIGKILL), but reads its stdout through
// boundedLines.
type stdioTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	return (&mcp.IOTransport{
		// The connection ends by closing stdin, never stdout: the
		// process's exit closes it.
		Reader: io.NopCloser(newBoundedLines(stdout, MaxMessageBytes)),
		Writer: &processInput{cmd: t.cmd, stdin: stdin, terminate: t.terminate},
	}).Connect(ctx)
}

// processInput is a stdio server's stdin; closing it ends the process.
type processInput struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
}

func (w *processInput) Write(p []byte) (int, error) { return w.stdin.Write(p) }

// Close closes stdin and waits for the process to exit: SIGTERM after
// terminate, SIGKILL after terminate again (MCP's stdio shutdown, as
// mcp.CommandTransport does it).
func (w *processInput) Close() error {
	if err := w.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(w.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := w.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return fmt.Errorf("unresponsive subprocess")
}

// boundedLines is a stdio server's stdout as the client reads it: a line
// (one JSON-RPC message) of at most max bytes is handed on whole; a
// longer one is read to its end without being kept, and in its place the
// client reads the pool's error answer to the call it answered (the
// message's top-level "id", found as it streams past), or nothing if it
// answered no call. The stream stays in step, so the connection, and
// every other call on it, carries on.
type boundedLines struct {
	br      *bufio.Reader
	max     int
	line    []byte
	drop    bool  // reading past a line over max
	dropped int64 // its bytes so far
	id      idScanner
	out     []byte
	err     error
}

func newBoundedLines(r io.Reader, max int) *boundedLines {
	return &boundedLines{br: bufio.NewReaderSize(r, readSize), max: max}
}

func (l *boundedLines) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		l.next()
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

func (l *boundedLines) next() {
	frag, err := l.br.ReadSlice('\n')
	if l.drop {
		l.id.feed(frag)
		l.dropped += int64(len(frag))
	} else {
		l.line = grow(l.line, frag, l.max)
		if len(l.line) > l.max {
			l.drop, l.id = true, idScanner{}
			l.id.feed(l.line)
			l.dropped, l.line = int64(len(l.line)), nil
		}
	}
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
	case err != nil:
		// The end of the stream: a line cut short by it is handed on
		// (the decoder reports it), one over the bound is not.
		if !l.drop {
			l.out, l.line = l.line, nil
		}
		l.err = err
	case l.drop:
		l.drop = false
		if id := l.id.found; id != nil {
			l.out = append(tooLargeAnswer(id, l.dropped, false), '\n')
		}
	default:
		l.out, l.line = l.line, nil
	}
}

// idScanner finds the top-level "id" member of a JSON object streaming
// past it, keeping nothing but that member's key and value: it follows
// strings and nesting, and captures a string or number value of a key
// "id" at depth 1.
type idScanner struct {
	depth      int
	inString   bool
	escaped    bool
	wantKey    bool   // the next string at depth 1 is a member's key
	inKey      bool   // reading that key
	key        []byte // its first bytes
	isID       bool   // the last key was "id"
	afterColon bool   // a value at depth 1 starts next
	capture    bool   // reading the id's value
	value      []byte
	found      json.RawMessage
}

const maxIDBytes = 256

func (s *idScanner) feed(b []byte) {
	for _, c := range b {
		if s.found != nil {
			return
		}
		s.step(c)
	}
}

func (s *idScanner) step(c byte) {
	if s.inString {
		if s.inKey && len(s.key) < 3 && c != '"' {
			s.key = append(s.key, c)
		}
		if s.capture {
			s.value = append(s.value, c)
		}
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.inKey {
				s.inKey, s.isID = false, string(s.key) == "id"
			}
			if s.capture {
				s.finish()
			}
		}
		if s.capture && len(s.value) > maxIDBytes {
			s.capture = false
		}
		return
	}
	if s.capture {
		switch c {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			s.finish()
			return
		}
		s.value = append(s.value, c)
		if len(s.value) > maxIDBytes {
			s.capture = false
		}
		return
	}
	value := s.depth == 1 && s.afterColon
	switch c {
	case ' ', '\t', '\r', '\n':
		return
	case '"':
		s.inString = true
		switch {
		case s.depth == 1 && s.wantKey:
			s.inKey, s.wantKey, s.key = true, false, s.key[:0]
		case value && s.isID:
			s.capture, s.value = true, append(s.value[:0], c)
		}
	case '{', '[':
		s.depth++
		if s.depth == 1 && c == '{' {
			s.wantKey = true
		}
	case '}', ']':
		s.depth--
	case ':':
		if s.depth == 1 {
			s.afterColon = true
			return
		}
	case ',':
		if s.depth == 1 {
			s.wantKey, s.isID = true, false
		}
	default:
		if value && s.isID && (c == '-' || c >= '0' && c <= '9') {
			s.capture, s.value = true, append(s.value[:0], c)
		}
	}
	if value {
		s.afterColon = false
	}
}

func (s *idScanner) finish() {
	s.capture = false
	if json.Valid(s.value) {
		s.found = bytes.Clone(s.value)
	}
}
