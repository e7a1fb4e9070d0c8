package catalog_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
)

// TestAStdioServersOversizedAnswerFailsOnlyItsCall: a stdio server's
// 15 MB answer (one line of its stdout) is read past, not held; the call
// it answers fails with a ResultTooLargeError giving its size, while the
// calls in flight beside it on the same process are answered, and so is
// the next one: the process and its connection live on.
func TestAStdioServersOversizedAnswerFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	const size = 15 << 20
	ctx := context.Background()
	files := catalogtest.NewStdioFiles(t)
	e := env{}
	prov := stdioProvider(t, files, e)
	pool := newPool(t, e, catalog.Options{Timeout: time.Minute})
	files.SetTools(t, catalogtest.ToolSpec{Name: "dump", ResultBytes: size}, catalogtest.ToolSpec{Name: "search"})
	_, err := pool.Call(ctx, prov, "search", nil)
	require.NoError(t, err)

	var wg sync.WaitGroup
	var dumpErr error
	wg.Go(func() { _, dumpErr = pool.Call(ctx, prov, "dump", nil) })
	answers := make([]*mcp.CallToolResult, 4)
	errs := make([]error, len(answers))
	for i := range answers {
		wg.Go(func() { answers[i], errs[i] = pool.Call(ctx, prov, "search", json.RawMessage(`{"q":"beside"}`)) })
	}
	wg.Wait()
	var big *toolapi.ResultTooLargeError
	require.ErrorAs(t, dumpErr, &big)
	assert.ErrorIs(t, dumpErr, errdefs.ErrResourceExhausted)
	assert.False(t, big.More, "a stdio answer is read to its end: its size is known")
	assert.Greater(t, big.Bytes, int64(size))
	assert.Less(t, big.Bytes, int64(size+1024))
	for i := range answers {
		require.NoError(t, errs[i])
		assert.Contains(t, answers[i].Content[0].(*mcp.TextContent).Text, `search called with {"q":"beside"}`)
	}

	res, err := pool.Call(ctx, prov, "search", nil)
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Len(t, files.Starts(t), 1, "one process throughout")
	testutil.Figure(t, "limit: catalog answer, stdio server", "a %d-byte answer failed its call (%v); 4 calls beside it and the next one answered by the same process",
		big.Bytes, dumpErr)
}
