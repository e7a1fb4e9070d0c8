package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionNamesTheContract(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"version"}, &out, &errOut)
	assert.Equal(t, 0, code, errOut.String())
	assert.Contains(t, out.String(), "contract toolscope.agentctl.v1.AgentctlService")

	out.Reset()
	code = run(context.Background(), []string{"serve-everything"}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "agentctl: unknown command")
}
