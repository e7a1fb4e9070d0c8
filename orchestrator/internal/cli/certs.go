package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/pki"
)

// certsCmd creates the mutual TLS material for remote agentctl hosts and
// API callers (init, server, client: local files only, no server is
// involved), and revokes API callers' client certificates on the
// orchestrator (revoke, revoked).
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
printed.

'certs revoke' makes the orchestrator refuse a client certificate from now on,
by its serial number (an admin's call); 'certs revoked' lists the revoked ones.`,
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
			client, err := ca.IssueOrchestrator(name, validFor)
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
			ca, err := loadCA(sdir)
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
			ca, err := loadCA(cdir)
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
			cert, err := readCertificate(filepath.Join(cdir, files[0].name))
			if err != nil {
				return err
			}
			return a.certsReport(cdir, files, fmt.Sprintf(
				"the orchestrator accepts it with 'serve --listen ADDR --tls-cert ... --tls-key ... --client-ca %s'; the caller runs:\n"+
					"  toolscope context set NAME --server ADDR --ca %s --cert %s --key %s\n"+
					"its serial number is %s: 'toolscope certs revoke --cert %s' makes the orchestrator refuse it",
				filepath.Join(cdir, "ca.crt"), filepath.Join(cdir, "ca.crt"), filepath.Join(cdir, files[0].name), filepath.Join(cdir, files[1].name),
				pki.Serial(cert), filepath.Join(cdir, files[0].name)), "serial", pki.Serial(cert))
		},
	}
	clientCmd.Flags().StringVar(&cdir, "dir", "", "directory holding the CA (from 'certs init')")
	clientCmd.Flags().StringVar(&cname, "name", "", "the caller's name (the certificate's common name; the actor in events and logs)")
	clientCmd.Flags().StringVar(&crole, "role", "member", "viewer, member or admin (the Subject's OrganizationalUnit)")
	clientCmd.Flags().DurationVar(&cvalid, "valid-for", 90*24*time.Hour, "validity of the certificate")
	var odir, oname string
	var ovalid time.Duration
	orchestratorCmd := &cobra.Command{
		Use:   "orchestrator --dir DIR",
		Short: "Issue a new orchestrator certificate for remote agentctl hosts, signed by the CA in DIR (when the one from 'certs init' nears its end)",
		Args:  ExactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if odir == "" {
				return Usagef("--dir is required")
			}
			ca, err := loadCA(odir)
			if err != nil {
				return err
			}
			pair, err := ca.IssueOrchestrator(oname, ovalid)
			if err != nil {
				return err
			}
			files := []certFile{{"orchestrator.crt", pair.CertPEM, 0o644}, {"orchestrator.key", pair.KeyPEM, 0o600}}
			if err := writeCerts(odir, files); err != nil {
				return err
			}
			return a.certsReport(odir, files, fmt.Sprintf(
				"restart 'toolscope serve --remote-cert %s --remote-key %s' to use it; the agentctl hosts need nothing new (same CA)",
				filepath.Join(odir, "orchestrator.crt"), filepath.Join(odir, "orchestrator.key")))
		},
	}
	orchestratorCmd.Flags().StringVar(&odir, "dir", "", "directory holding the CA (from 'certs init'); orchestrator.crt and .key are replaced")
	orchestratorCmd.Flags().StringVar(&oname, "name", "toolscope orchestrator", "common name of the orchestrator's certificate")
	orchestratorCmd.Flags().DurationVar(&ovalid, "valid-for", 365*24*time.Hour, "validity of the certificate")
	cmd.AddCommand(initCmd, serverCmd, clientCmd, orchestratorCmd, a.certsRevokeCmd(), a.certsRevokedCmd())
	return cmd
}

// loadCA reads the CA that 'certs init' wrote in dir.
func loadCA(dir string) (*pki.CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read the CA (run 'toolscope certs init --dir %s' first): %w", dir, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, fmt.Errorf("read the CA key: %w", err)
	}
	return pki.LoadCA(certPEM, keyPEM)
}

// certsRevokeCmd revokes a client certificate on the orchestrator, named
// by its file (which also describes it in listings) or its serial.
func (a *app) certsRevokeCmd() *cobra.Command {
	var certPath string
	cmd := &cobra.Command{
		Use:   "revoke (SERIAL | --cert FILE)",
		Short: "Make the orchestrator refuse a client certificate from now on, by its serial number or its file",
		Args: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (certPath != "") {
				return Usagef("certs revoke takes a serial number or --cert FILE, one of the two")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &pb.RevokeCertificateRequest{}
			if certPath != "" {
				cert, err := readCertificate(certPath)
				if err != nil {
					return err
				}
				req.Serial, req.Name, req.Issuer = pki.Serial(cert), cert.Subject.CommonName, cert.Issuer.String()
				req.ExpireTime = timestamppb.New(cert.NotAfter)
			} else {
				serial, err := pki.ParseSerial(args[0])
				if err != nil {
					return Usagef("%v", err)
				}
				req.Serial = serial
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := pb.NewAuthServiceClient(conn).RevokeCertificate(ctx, req)
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					rc := resp.GetRevokedCertificate()
					fmt.Fprintf(w, "revoked the certificate with serial %s", rc.GetSerial())
					if rc.GetName() != "" {
						fmt.Fprintf(w, " (%s)", rc.GetName())
					}
					fmt.Fprintln(w, "; the orchestrator refuses it from now on")
				})
			})
		},
	}
	cmd.Flags().StringVar(&certPath, "cert", "", "the certificate's PEM file (from 'certs client'), instead of its serial")
	return cmd
}

// certsRevokedCmd lists the revoked client certificates.
func (a *app) certsRevokedCmd() *cobra.Command {
	return &cobra.Command{
		Use: "revoked", Short: "List the client certificates the orchestrator refuses", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := pb.NewAuthServiceClient(conn).ListRevokedCertificates(ctx, &pb.ListRevokedCertificatesRequest{})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintln(w, "SERIAL	NAME	EXPIRES	REVOKED	BY")
					for _, rc := range resp.GetRevokedCertificates() {
						expires := "-"
						if rc.GetExpireTime() != nil {
							expires = rc.GetExpireTime().AsTime().Format(time.RFC3339)
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", rc.GetSerial(), orDash(rc.GetName()), expires,
							rc.GetRevokeTime().AsTime().Format(time.RFC3339), orDash(rc.GetRevokedBy()))
					}
				})
			})
		},
	}
}

// readCertificate reads the first certificate of the PEM file path.
func readCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --cert %s: %w", path, err)
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, Usagef("--cert %s holds no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, Usagef("--cert %s: %v", path, err)
			}
			return cert, nil
		}
	}
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

// certsReport says which files were written and what to do next; fields
// are key, value pairs the --json output also carries.
func (a *app) certsReport(dir string, files []certFile, next string, fields ...string) error {
	if a.json {
		var names []string
		for _, f := range files {
			names = append(names, filepath.Join(dir, f.name))
		}
		out := map[string]any{"files": names}
		for i := 0; i+1 < len(fields); i += 2 {
			out[fields[i]] = fields[i+1]
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	for _, f := range files {
		fmt.Fprintf(a.stdout, "wrote %s\n", filepath.Join(dir, f.name))
	}
	fmt.Fprintln(a.stdout, next)
	return nil
}
