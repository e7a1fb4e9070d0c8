package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// installCmd copies this agentctl to a path: how the Kubernetes executor's
// init container puts agentctl, from a FROM-scratch toolscope image that
// has no cp, into the volume the user's image runs it from (ADR 0031).
func installCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "install PATH",
		Short: "Copy this agentctl binary to PATH (mode 0755), for images without a shell",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return install(args[0])
		},
	}
}

func install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".agentctl-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s to %s: %w", self, dest, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
