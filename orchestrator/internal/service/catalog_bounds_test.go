package service

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// An MCP server's header name is an HTTP token of 1 to 128 bytes.
func TestHeaderNamesAreBounded(t *testing.T) {
	check := func(name string) error {
		_, err := checkHTTP(model.HTTPTransport{URL: "https://kb.example/mcp", Headers: []model.HeaderReference{
			{Name: name, Prefix: "Bearer ", Value: model.CredentialRef{Kind: model.CredentialEnv, Ref: "KB_TOKEN"}}}})
		return err
	}
	require.NoError(t, check("X-"+strings.Repeat("a", 126)))
	for _, bad := range []string{"", "X-" + strings.Repeat("a", 127), "X Api", "X:Api"} {
		assert.ErrorIs(t, check(bad), errdefs.ErrInvalidArgument, "%q", bad)
	}
}
