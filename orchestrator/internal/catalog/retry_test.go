package catalog_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestACallAnsweredWithAnHTTPErrorIsNotRepeated: a gateway in front of
// the server lets a tools/call through and then answers 502, as a proxy
// that timed out would. The call ran, so the pool must not send it again
// (go-sdk reports a 5xx like a request that was never sent); it reports
// the failure, and the next call works on a new connection.
func TestACallAnsweredWithAnHTTPErrorIsNotRepeated(t *testing.T) {
	t.Parallel()
	server := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	server.SetTools(specs("create")...)
	target, err := url.Parse(server.URL)
	require.NoError(t, err)
	var failNext atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && failNext.CompareAndSwap(true, false) {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)                                    // the server runs the call...
			http.Error(w, "upstream timed out", http.StatusBadGateway) // ...the gateway answers 502
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(gateway.Close)

	prov := model.MCPServer{ID: "tp_gateway", Name: "tickets", Transport: model.TransportHTTP,
		HTTP: &model.HTTPTransport{URL: gateway.URL + target.Path}}
	pool := newPool(t, env{}, catalog.Options{})
	ctx := context.Background()
	_, err = pool.Call(ctx, prov, "create", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"create"}, server.CallNames())

	failNext.Store(true)
	_, err = pool.Call(ctx, prov, "create", nil)
	require.Error(t, err, "the 502 is reported")
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Equal(t, []string{"create", "create"}, server.CallNames(), "the call that got a 502 ran once, and was not sent again")

	_, err = pool.Call(ctx, prov, "create", nil)
	require.NoError(t, err, "the next call works")
	assert.Len(t, server.CallNames(), 3)
}
