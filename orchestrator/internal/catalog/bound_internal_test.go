package catalog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// filler is n bytes of 'x', made as they are read (it holds nothing),
// counting what was read of it.
type filler struct {
	left int64
	read *atomic.Int64
}

func (f *filler) Read(p []byte) (int, error) {
	if f.left == 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	n = min(n, f.left)
	for i := range n {
		p[i] = 'x'
	}
	f.left -= n
	if f.read != nil {
		f.read.Add(n)
	}
	return int(n), nil
}

// bigAnswer is a JSON-RPC answer to call id whose text is n bytes, with
// the id before or after the result, as servers write it either way.
func bigAnswer(id string, n int64, idLast bool, read *atomic.Int64) io.Reader {
	head, tail := answerParts(id, idLast)
	return io.MultiReader(strings.NewReader(head), &filler{left: n, read: read}, strings.NewReader(tail))
}

// bigAnswerLen is the length of bigAnswer's answer.
func bigAnswerLen(id string, n int64, idLast bool) int64 {
	head, tail := answerParts(id, idLast)
	return int64(len(head)+len(tail)) + n
}

func answerParts(id string, idLast bool) (head, tail string) {
	if idLast {
		return `{"result":{"content":[{"type":"text","text":"`, `"}],"structuredContent":{"id":"not-this-one"}},"jsonrpc":"2.0","id":` + id + `}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"`, `"}]}}`
}

// TestTheIDOfAnAnswerIsFoundAsItStreamsPast: the top-level "id" of a
// message, wherever it stands, and never one nested in the result or
// inside a string.
func TestTheIDOfAnAnswerIsFoundAsItStreamsPast(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"result":{}}`:                                                         `7`,
		`{"result":{"id":1,"text":"\"id\":2, {"},"jsonrpc":"2.0","id":"req-3"}`:                        `"req-3"`,
		`{ "result" : [ {"id" : 4} ] , "id" : -12 }`:                                                   `-12`,
		`{"method":"notifications/progress","params":{"id":5,"progressToken":"id"}}`:                   ``,
		`{"idx":1,"xid":2,"i":3,"id":"a\"b\\"}`:                                                        `"a\"b\\"`,
		`{"error":{"data":"}}}]]]","id":9},"id":10}`:                                                   `10`,
		`{"id":{"not":"an id"},"x":1}`:                                                                 ``,
		`{"id":null}`:                                                                                  ``,
		`{"id":"` + strings.Repeat("z", maxIDBytes) + `"}`:                                             ``,
		`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 70000) + `"}]},"id":11}`: `11`,
	} {
		for _, chunk := range []int{1, 3, 1 << 20} {
			var s idScanner
			for b := []byte(msg); len(b) > 0; {
				n := min(chunk, len(b))
				s.feed(b[:n])
				b = b[n:]
			}
			assert.Equal(t, want, string(s.found), "%.80s in chunks of %d", msg, chunk)
		}
	}
}

// TestAStdioLineOverTheBoundIsReadPastNotHeld: a stdio server's 15 MB
// answer is read to its end without being kept (the allocations of
// reading it stay a small multiple of the bound, not its 15 MB), the
// client reads the pool's error answer to that call in its place, and the
// lines around it pass unchanged: the stream stays in step.
func TestAStdioLineOverTheBoundIsReadPastNotHeld(t *testing.T) {
	const size = 15 << 20
	before := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n"
	after := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n"
	for _, idLast := range []bool{false, true} {
		var read atomic.Int64
		in := io.MultiReader(strings.NewReader(before), bigAnswer("2", size, idLast, &read), strings.NewReader("\n"+after))
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		out, err := io.ReadAll(newBoundedLines(in, MaxMessageBytes))
		runtime.ReadMemStats(&m1)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		require.Len(t, lines, 3)
		assert.Equal(t, strings.TrimSpace(before), lines[0])
		assert.Equal(t, strings.TrimSpace(after), lines[2])
		var answer struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int64        `json:"code"`
				Data tooLargeData `json:"data"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(lines[1]), &answer), lines[1])
		assert.Equal(t, "2", string(answer.ID))
		assert.Equal(t, int64(codeTooLarge), answer.Error.Code)
		assert.Equal(t, tooLargeMark, answer.Error.Data.Toolscope)
		assert.Greater(t, answer.Error.Data.Bytes, int64(size), "the line's whole size")
		assert.Equal(t, int64(size), read.Load(), "read to its end")
		allocated := m1.TotalAlloc - m0.TotalAlloc
		assert.Less(t, allocated, uint64(3*MaxMessageBytes), "reading a %d-byte line allocated %d bytes", size, allocated)
		testutil.Figure(t, "limit: catalog answer, stdio", "a %d-byte line (id last: %v) read past with %d bytes allocated (bound %d a message)",
			size, idLast, allocated, MaxMessageBytes)
	}
}

// fakeHTTP answers every request with the response its function makes.
type fakeHTTP func(*http.Request) *http.Response

func (f fakeHTTP) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

func post(t *testing.T, rt http.RoundTripper) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://mcp.invalid/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"dump"}}`))
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	return resp
}

// TestHTTPAnswersOverTheBoundAreNotRead: an HTTP server's 15 MB answer
// to a call is read no further than the bound (not at all when its
// Content-Length says so), whether a JSON body or an event stream, and the
// client reads the pool's error answer to the call in its place; an
// answer within the bound, and the events before a large one, pass
// unchanged; an error status's body is cut at the bound.
func TestHTTPAnswersOverTheBoundAreNotRead(t *testing.T) {
	t.Parallel()
	const size = 15 << 20
	tooLarge := func(t *testing.T, body []byte) *toolapi.ResultTooLargeError {
		t.Helper()
		var answer struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int64           `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &answer), "%.200s", body)
		assert.Equal(t, "42", string(answer.ID))
		return asTooLarge(&jsonrpc.Error{Code: answer.Error.Code, Message: answer.Error.Message, Data: answer.Error.Data})
	}
	for _, c := range []struct {
		name, media string
		length      int64
		maxRead     int64
	}{
		{"json with its length", "application/json", bigAnswerLen("42", size, false), 0},
		{"json chunked", "application/json", -1, MaxMessageBytes + 1},
		{"event stream", "text/event-stream", -1, MaxMessageBytes + readSize},
	} {
		t.Run(c.name, func(t *testing.T) {
			var read atomic.Int64
			rt := &boundedTransport{max: MaxMessageBytes, base: fakeHTTP(func(*http.Request) *http.Response {
				body := bigAnswer("42", size, false, &read)
				if c.media == "text/event-stream" {
					body = io.MultiReader(strings.NewReader("id: 1\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: "),
						body, strings.NewReader("\n\n"))
				}
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {c.media + "; charset=utf-8"}},
					ContentLength: c.length, Body: io.NopCloser(body)}
			})}
			resp := post(t, rt)
			out, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.LessOrEqual(t, read.Load(), c.maxRead, "bytes of the answer read")
			if c.media == "text/event-stream" {
				events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
				require.Len(t, events, 3, "%.300s", out)
				assert.Equal(t, "id: 1\ndata: ", events[0], "the events before pass")
				assert.Contains(t, events[1], "notifications/progress")
				require.True(t, strings.HasPrefix(events[2], "event: message\ndata: "), events[2])
				out = []byte(strings.TrimPrefix(events[2], "event: message\ndata: "))
			}
			big := tooLarge(t, out)
			require.NotNil(t, big)
			if c.length > 0 {
				assert.Equal(t, toolapi.ResultTooLargeError{Bytes: c.length}, *big)
			} else {
				assert.Equal(t, toolapi.ResultTooLargeError{Bytes: MaxMessageBytes, More: true}, *big)
			}
		})
	}

	small := `{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"fine"}]}}`
	for _, media := range []string{"application/json", "text/event-stream"} {
		body := small
		if media == "text/event-stream" {
			body = "event: message\ndata: " + small + "\n\n"
		}
		rt := &boundedTransport{max: MaxMessageBytes, base: fakeHTTP(func(*http.Request) *http.Response {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {media}}, ContentLength: -1,
				Body: io.NopCloser(strings.NewReader(body))}
		})}
		out, err := io.ReadAll(post(t, rt).Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(out), media)
	}

	var read atomic.Int64
	rt := &boundedTransport{max: MaxMessageBytes, base: fakeHTTP(func(*http.Request) *http.Response {
		return &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {"text/plain"}}, ContentLength: -1,
			Body: io.NopCloser(&filler{left: size, read: &read})}
	})}
	out, err := io.ReadAll(post(t, rt).Body)
	require.NoError(t, err)
	assert.Len(t, out, MaxMessageBytes, "an error body is cut at the bound")
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestConcurrentOversizedCatalogAnswersAreNotHeld replays the finding's
// second part: twelve calls at once to a catalog HTTP server's tool whose
// result is 15 MB took the orchestrator from 82 to 540 MB. Now each call
// fails with a ResultTooLargeError, the pool reads no more of each answer
// than the bound (counted on its connections: ~3 MiB a call, not 15 MB;
// nothing when the answer's length says it is over), and the server's
// connection (its MCP session) lives on: the next call is answered on it.
// A gateway in front of a go-sdk server streams the large answers itself,
// as an event stream or a JSON body, made as they are sent.
func TestConcurrentOversizedCatalogAnswersAreNotHeld(t *testing.T) {
	t.Parallel()
	const size, calls = 15 << 20, 12
	for _, form := range []string{"event stream", "json", "json with its length"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{JSONResponse: form != "event stream"})
			srv.SetTools(catalogtest.ToolSpec{Name: "dump"}, catalogtest.ToolSpec{Name: "lookup"})
			target, err := url.Parse(srv.URL)
			require.NoError(t, err)
			proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
			var served, written atomic.Int64
			gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(strings.NewReader(string(body)))
				var msg struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						Name string `json:"name"`
					} `json:"params"`
				}
				if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || msg.Params.Name != "dump" {
					proxy.ServeHTTP(w, r)
					return
				}
				served.Add(1)
				idLast := served.Load()%2 == 0
				answer := bigAnswer(string(msg.ID), size, idLast, nil)
				switch form {
				case "event stream":
					w.Header().Set("Content-Type", "text/event-stream")
					answer = io.MultiReader(strings.NewReader("event: message\ndata: "), answer, strings.NewReader("\n\n"))
				case "json with its length":
					w.Header().Set("Content-Length", strconv.FormatInt(bigAnswerLen(string(msg.ID), size, idLast), 10))
					fallthrough
				default:
					w.Header().Set("Content-Type", "application/json")
				}
				n, _ := io.Copy(w, answer)
				written.Add(n)
			}))
			t.Cleanup(gateway.Close)

			logs := &testutil.SyncBuffer{}
			pool := New(Options{Timeout: time.Minute, WorkDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
			t.Cleanup(func() { _ = pool.Close() })
			var read atomic.Int64
			dialer := &net.Dialer{}
			pool.httpT.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: c, n: &read}, nil
			}
			prov := model.MCPServer{ID: "tp_dumps", Name: "dumps", Transport: model.TransportHTTP,
				HTTP: &model.HTTPTransport{URL: gateway.URL + target.Path}}
			_, err = pool.Call(ctx, prov, "lookup", nil)
			require.NoError(t, err)

			start := read.Load()
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() { _, errs[i] = pool.Call(ctx, prov, "dump", nil) })
			}
			wg.Wait()
			got := read.Load() - start
			for _, err := range errs {
				var big *toolapi.ResultTooLargeError
				require.ErrorAs(t, err, &big)
				assert.ErrorIs(t, err, errdefs.ErrResourceExhausted)
				assert.Regexp(t, `^MCP server "dumps": call dump: the answer is (more than )?\d+ bytes; the pool reads at most 3145728 bytes of one message`, err.Error())
			}
			assert.Equal(t, int64(calls), served.Load())
			bound := int64(calls * (MaxMessageBytes + 256<<10))
			if form == "json with its length" {
				bound = calls * 64 << 10
			}
			assert.Less(t, got, bound, "bytes read from the server's answers")

			res, err := pool.Call(ctx, prov, "lookup", nil)
			require.NoError(t, err, "the connection lives on")
			assert.False(t, res.IsError)
			assert.Equal(t, 1, strings.Count(logs.String(), "connected to an MCP server"), "one connection throughout:\n%s", logs)
			assert.Equal(t, []string{"lookup", "lookup"}, srv.CallNames())
			testutil.Figure(t, "limit: catalog answer, HTTP "+form, "%d calls at once to a tool answering %d bytes: %d bytes read by the pool in all "+
				"(%d a call; bound %d a message; the server got %d bytes out before the pool stopped reading), each failed result_too_large, the connection kept",
				calls, size, got, got/calls, MaxMessageBytes, written.Load())
		})
	}
}
