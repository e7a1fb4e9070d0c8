package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolscope/toolscope/internal/pki"
)

// certsCmd creates the mutual TLS material for remote agentctl hosts. It
// works on local files only; no server is involved.
func (a *app) certsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create the CA and certificates for mutual TLS (remote agentctl hosts, the API over TCP)",
		Long: `Create TLS certificates. 'certs init' creates a CA and the orchestrator's client
certificate for remote agentctl hosts; 'certs server' issues a server certificate
(for an agentctl host, or for the orchestrator's own 'serve --listen' with
--name); 'certs client' issues an API caller's client certificate carrying a
role in its Subject's OrganizationalUnit (OU=viewer, member or admin), which
'serve --client-ca' accepts. Private keys are written with mode 0600 and never
printed.`,
	}
	var dir, name string
	var validFor time.Duration
	initCmd := &cobra.Command{
		Use: "init --dir DIR", Short: "Create a CA and the orchestrator's client certificate in DIR", Args: ExactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				return Usagef("--dir is required")
			}
			if _, err := os.Stat(filepath.Join(dir, "ca.key")); err == nil {
				return fmt.Errorf("%s already holds a CA (ca.key); remove it or pick another --dir: refusing to overwrite", dir)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			ca, err := pki.NewCA("toolscope CA", validFor)
			if err != nil {
				return err
			}
			client, err := ca.IssueClient(name, validFor)
			if err != nil {
				return err
			}
			files := []certFile{
				{"ca.crt", ca.CertPEM, 0o644}, {"ca.key", ca.KeyPEM, 0o600},
				{"orchestrator.crt", client.CertPEM, 0o644}, {"orchestrator.key", client.KeyPEM, 0o600},
			}
			if err := writeCerts(dir, files); err != nil {
				return err
			}
			return a.certsReport(dir, files, fmt.Sprintf(
				"next: 'toolscope certs server --dir %s --host HOST' for each agentctl host, then\n"+
					"  toolscope serve --remote-addr HOST:PORT --remote-cert %s --remote-key %s --remote-ca %s",
				dir, filepath.Join(dir, "orchestrator.crt"), filepath.Join(dir, "orchestrator.key"), filepath.Join(dir, "ca.crt")))
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory to write into (created)")
	initCmd.Flags().StringVar(&name, "name", "toolscope orchestrator", "common name of the orchestrator's certificate")
	initCmd.Flags().DurationVar(&validFor, "valid-for", 365*24*time.Hour, "validity of the certificates")

	var sdir, sname string
	var hosts []string
	var svalid time.Duration
	serverCmd := &cobra.Command{
		Use: "server --dir DIR --host HOST [--host HOST...]", Short: "Issue a certificate for an agentctl host, signed by the CA in DIR",
		Args: ExactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if sdir == "" || len(hosts) == 0 {
				return Usagef("--dir and at least one --host are required")
			}
			certPEM, err := os.ReadFile(filepath.Join(sdir, "ca.crt"))
			if err != nil {
				return fmt.Errorf("read the CA (run 'toolscope certs init --dir %s' first): %w", sdir, err)
			}
			keyPEM, err := os.ReadFile(filepath.Join(sdir, "ca.key"))
			if err != nil {
				return fmt.Errorf("read the CA key: %w", err)
			}
			ca, err := pki.LoadCA(certPEM, keyPEM)
			if err != nil {
				return err
			}
			pair, err := ca.IssueServer("agentctl "+hosts[0], hosts, svalid)
			if err != nil {
				return err
			}
			base := "agentctl-" + strings.NewReplacer(":", "_", "/", "_").Replace(hosts[0])
			if sname != "" {
				base = sname
			}
			if !validFileBase(base) {
				return Usagef("invalid --name %q: letters, digits, '.', '_' and '-'", base)
			}
			files := []certFile{{base + ".crt", pair.CertPEM, 0o644}, {base + ".key", pair.KeyPEM, 0o600}}
			if err := writeCerts(sdir, files); err != nil {
				return err
			}
			return a.certsReport(sdir, files, fmt.Sprintf(
				"copy %s, %s and ca.crt to %s, then run there:\n"+
					"  agentctl serve --listen 0.0.0.0:7077 --tls-cert %s --tls-key %s --client-ca ca.crt",
				files[0].name, files[1].name, hosts[0], files[0].name, files[1].name))
		},
	}
	serverCmd.Flags().StringVar(&sdir, "dir", "", "directory holding the CA (from 'certs init')")
	serverCmd.Flags().StringSliceVar(&hosts, "host", nil, "DNS name or IP address the orchestrator dials (repeatable)")
	serverCmd.Flags().DurationVar(&svalid, "valid-for", 365*24*time.Hour, "validity of the certificate")
	serverCmd.Flags().StringVar(&sname, "name", "", "base name of the files (default agentctl-HOST; e.g. 'orchestrator-api' for 'serve --tls-cert')")

	var cdir, cname, crole string
	var cvalid time.Duration
	clientCmd := &cobra.Command{
		Use:   "client --dir DIR --name NAME --role ROLE",
		Short: "Issue an API caller's client certificate, with its role, signed by the CA in DIR",
		Args:  ExactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if cdir == "" || cname == "" {
				return Usagef("--dir and --name are required")
			}
			if !validFileBase(cname) {
				return Usagef("invalid --name %q: letters, digits, '.', '_' and '-'", cname)
			}
			if _, err := parseRole(crole); err != nil {
				return err
			}
			certPEM, err := os.ReadFile(filepath.Join(cdir, "ca.crt"))
			if err != nil {
				return fmt.Errorf("read the CA (run 'toolscope certs init --dir %s' first): %w", cdir, err)
			}
			keyPEM, err := os.ReadFile(filepath.Join(cdir, "ca.key"))
			if err != nil {
				return fmt.Errorf("read the CA key: %w", err)
			}
			ca, err := pki.LoadCA(certPEM, keyPEM)
			if err != nil {
				return err
			}
			pair, err := ca.IssueClient(cname, cvalid, crole)
			if err != nil {
				return err
			}
			base := "client-" + cname
			files := []certFile{{base + ".crt", pair.CertPEM, 0o644}, {base + ".key", pair.KeyPEM, 0o600}}
			if err := writeCerts(cdir, files); err != nil {
				return err
			}
			return a.certsReport(cdir, files, fmt.Sprintf(
				"the orchestrator accepts it with 'serve --listen ADDR --tls-cert ... --tls-key ... --client-ca %s'; the caller runs:\n"+
					"  toolscope context set NAME --server ADDR --ca %s --cert %s --key %s",
				filepath.Join(cdir, "ca.crt"), filepath.Join(cdir, "ca.crt"), filepath.Join(cdir, files[0].name), filepath.Join(cdir, files[1].name)))
		},
	}
	clientCmd.Flags().StringVar(&cdir, "dir", "", "directory holding the CA (from 'certs init')")
	clientCmd.Flags().StringVar(&cname, "name", "", "the caller's name (the certificate's common name; the actor in events and logs)")
	clientCmd.Flags().StringVar(&crole, "role", "member", "viewer, member or admin (the Subject's OrganizationalUnit)")
	clientCmd.Flags().DurationVar(&cvalid, "valid-for", 90*24*time.Hour, "validity of the certificate")
	cmd.AddCommand(initCmd, serverCmd, clientCmd)
	return cmd
}

// fileBase is a certificate file's base name, at most 100 bytes (checked
// apart, validFileBase: `{0,99}` compiles into a program 99 times as
// long, ≈0.5 ms of every CLI call's start).
var fileBase = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func validFileBase(s string) bool { return len(s) <= 100 && fileBase.MatchString(s) }

type certFile struct {
	name string
	body []byte
	mode os.FileMode
}

// writeCerts writes every file or none: into a temporary name first.
func writeCerts(dir string, files []certFile) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var written []string
	for _, f := range files {
		tmp := filepath.Join(dir, "."+f.name+".tmp")
		if err := os.WriteFile(tmp, f.body, f.mode); err != nil {
			for _, w := range written {
				_ = os.Remove(w)
			}
			return err
		}
		written = append(written, tmp)
	}
	for i, f := range files {
		if err := os.Rename(written[i], filepath.Join(dir, f.name)); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) certsReport(dir string, files []certFile, next string) error {
	if a.json {
		var names []string
		for _, f := range files {
			names = append(names, filepath.Join(dir, f.name))
		}
		return json.NewEncoder(a.stdout).Encode(map[string]any{"files": names})
	}
	for _, f := range files {
		fmt.Fprintf(a.stdout, "wrote %s\n", filepath.Join(dir, f.name))
	}
	fmt.Fprintln(a.stdout, next)
	return nil
}
