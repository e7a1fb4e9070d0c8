package cli

import (
	"net"
	"os"
	"strings"
	"time"
)

// demoContextName is the context `toolscope demo` makes current while it
// runs, the way `kind create cluster` sets kubectl's.
const demoContextName = "demo"

// DemoContext is what SetDemoContext did: the context it made current, in
// which config file, the context that was current before, and how to undo
// it. The demo (package demo, in toolscope-server) takes it from here:
// package cli links nothing of the server (ADR 0035).
type DemoContext struct {
	Name, Config, Previous string
	// Overridden names the environment variables of this process that
	// beat the config file (TOOLSCOPE_ADDR, TOOLSCOPE_CONTEXT), if set.
	Overridden []string
	Restore    func() error
}

// SetDemoContext writes the context "demo" (server: the demo's socket) into
// the CLI config file, through the same code path as 'toolscope context
// set', and makes it current. Its Restore removes it again and, if "demo"
// is still current, makes the previous context current again; a context
// the user made current meanwhile stays current, and a "demo" context that
// another demo has taken over since is left to that demo.
func SetDemoContext(server string) (DemoContext, error) {
	path, cfg, err := loadConfig()
	if err != nil {
		return DemoContext{}, err
	}
	prev := cfg.CurrentContext
	// A "demo" context already there is the user's own, or another
	// running demo's: keep it to put back. One whose socket is dead was
	// left behind by a demo killed with SIGKILL: drop it.
	var saved *clientContext
	if c := cfg.find(demoContextName); c != nil {
		if live(c.Server) {
			cp := *c
			saved = &cp
		} else if prev == demoContextName {
			prev = ""
		}
		*c = clientContext{Name: demoContextName, Server: server}
	} else {
		cfg.Contexts = append(cfg.Contexts, clientContext{Name: demoContextName, Server: server})
	}
	cfg.CurrentContext = demoContextName
	if err := saveConfig(path, cfg); err != nil {
		return DemoContext{}, err
	}
	var overridden []string
	for _, env := range []string{envAddr, envContext} {
		if os.Getenv(env) != "" {
			overridden = append(overridden, env)
		}
	}
	restore := func() error {
		_, cfg, err := loadConfig()
		if err != nil {
			return err
		}
		c := cfg.find(demoContextName)
		if c == nil || c.Server != server {
			return nil // removed, or taken over by another demo
		}
		if saved != nil {
			*c = *saved
		} else {
			kept := cfg.Contexts[:0]
			for _, c := range cfg.Contexts {
				if c.Name != demoContextName {
					kept = append(kept, c)
				}
			}
			cfg.Contexts = kept
		}
		if cfg.CurrentContext == demoContextName {
			cfg.CurrentContext = ""
			if prev != "" && cfg.find(prev) != nil {
				cfg.CurrentContext = prev
			}
		}
		return saveConfig(path, cfg)
	}
	return DemoContext{Name: demoContextName, Config: path, Previous: prev, Overridden: overridden, Restore: restore}, nil
}

// live reports whether something accepts connections at a unix:// server
// (any other address counts as live: it is not the demo's to judge).
func live(server string) bool {
	path, ok := strings.CutPrefix(server, "unix://")
	if !ok {
		return true
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return !deadSocket(err)
	}
	_ = conn.Close()
	return true
}
