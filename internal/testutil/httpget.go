package testutil

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// GetOK reads url's body over HTTP, within 30 s, and fails t unless it is
// answered 200 (a /metrics scrape, say).
func GetOK(t testing.TB, url string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "GET %s", url)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return b
}
