package cli

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withConfig points TOOLSCOPE_CONFIG at a temporary file holding c (never
// the user's config file) and clears the variables that beat it.
func withConfig(t *testing.T, c *config) string {
	path := filepath.Join(t.TempDir(), "config.json")
	t.Setenv(envConfig, path)
	t.Setenv(envAddr, "")
	t.Setenv(envContext, "")
	if c != nil {
		require.NoError(t, saveConfig(path, *c))
	}
	return path
}

func readConfig(t *testing.T) config {
	t.Helper()
	_, c, err := loadConfig()
	require.NoError(t, err)
	return c
}

func liveSocket(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return "unix://" + l.Addr().String()
}

const demoServer = "unix:///tmp/toolscope-demo-x/toolscope.sock"

func TestDemoContextRestoresThePrevious(t *testing.T) {
	path := withConfig(t, &config{CurrentContext: "mine", Contexts: []clientContext{{Name: "mine", Server: "127.0.0.1:9"}}})
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := SetDemoContext(demoServer)
	require.NoError(t, err)
	assert.Equal(t, "mine", c.Previous)
	cfg := readConfig(t)
	assert.Equal(t, "demo", cfg.CurrentContext)
	assert.Equal(t, demoServer, cfg.find("demo").Server)

	require.NoError(t, c.Restore())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

func TestDemoContextFromNoConfigFile(t *testing.T) {
	withConfig(t, nil)
	c, err := SetDemoContext(demoServer)
	require.NoError(t, err)
	assert.Equal(t, "", c.Previous)
	require.NoError(t, c.Restore())
	cfg := readConfig(t)
	assert.Empty(t, cfg.Contexts)
	assert.Empty(t, cfg.CurrentContext)
}

func TestDemoContextLeavesTheUsersSwitch(t *testing.T) {
	withConfig(t, &config{CurrentContext: "mine", Contexts: []clientContext{{Name: "mine", Server: "127.0.0.1:9"}, {Name: "other", Server: "127.0.0.1:10"}}})
	c, err := SetDemoContext(demoServer)
	require.NoError(t, err)
	cfg := readConfig(t)
	cfg.CurrentContext = "other" // 'toolscope context use other' meanwhile
	path, _ := configPath()
	require.NoError(t, saveConfig(path, cfg))
	require.NoError(t, c.Restore())
	cfg = readConfig(t)
	assert.Equal(t, "other", cfg.CurrentContext)
	assert.Nil(t, cfg.find("demo"))
}

func TestDemoContextPutsBackALiveDemoContext(t *testing.T) {
	// The user's own "demo" context, or another running demo's.
	theirs := liveSocket(t)
	withConfig(t, &config{CurrentContext: "demo", Contexts: []clientContext{{Name: "demo", Server: theirs, TokenEnv: "X"}}})
	c, err := SetDemoContext(demoServer)
	require.NoError(t, err)
	assert.Equal(t, "demo", c.Previous)
	mid := readConfig(t)
	assert.Equal(t, clientContext{Name: "demo", Server: demoServer}, *mid.find("demo"), "nothing of theirs is used")
	require.NoError(t, c.Restore())
	cfg := readConfig(t)
	assert.Equal(t, "demo", cfg.CurrentContext)
	assert.Equal(t, clientContext{Name: "demo", Server: theirs, TokenEnv: "X"}, *cfg.find("demo"))
}

func TestDemoContextDropsAKilledDemosContext(t *testing.T) {
	dead := "unix://" + filepath.Join(t.TempDir(), "toolscope.sock")
	withConfig(t, &config{CurrentContext: "demo", Contexts: []clientContext{{Name: "mine", Server: "127.0.0.1:9"}, {Name: "demo", Server: dead}}})
	c, err := SetDemoContext(demoServer)
	require.NoError(t, err)
	assert.Equal(t, "", c.Previous)
	require.NoError(t, c.Restore())
	cfg := readConfig(t)
	assert.Equal(t, "", cfg.CurrentContext)
	assert.Nil(t, cfg.find("demo"))
	assert.Len(t, cfg.Contexts, 1)
}

func TestDemoContextTakenOverByAnotherDemo(t *testing.T) {
	withConfig(t, nil)
	c, err := SetDemoContext(demoServer)
	require.NoError(t, err)
	cfg := readConfig(t)
	cfg.find("demo").Server = "unix:///tmp/another-demo/toolscope.sock"
	path, _ := configPath()
	require.NoError(t, saveConfig(path, cfg))
	require.NoError(t, c.Restore())
	assert.Equal(t, cfg, readConfig(t), "the other demo's context is left to it")
}
