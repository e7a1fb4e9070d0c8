package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// maxSocketPath is the longest path a Unix socket address holds (Linux
// sun_path, less its terminating NUL).
const maxSocketPath = 107

// checkListen validates the TCP listener's configuration before anything
// starts: a non-loopback address needs TLS. It returns the TLS
// configuration, nil for plain TCP or no TCP at all.
func checkListen(cfg Config) (*tls.Config, error) {
	t := cfg.TLS
	if cfg.Listen == "" && cfg.Console == "" && cfg.Hosted == "" {
		if t.CertFile != "" || t.KeyFile != "" || t.ClientCA != "" {
			return nil, errdefs.InvalidField("listen", "TLS files were given but no --listen, --console or --hosted address to serve them on")
		}
		return nil, nil
	}
	// The TCP listener, the console and the hosted endpoint share the TLS
	// files; each address needs them unless it is loopback.
	for _, a := range []struct{ field, flag, addr string }{{"listen", "--listen", cfg.Listen}, {"console", "--console", cfg.Console}, {"hosted", "--hosted", cfg.Hosted}} {
		if a.addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil {
			return nil, errdefs.InvalidField(a.field, "%q is not host:port: %v", a.addr, err)
		}
		if t.CertFile == "" && t.KeyFile == "" && !loopback(host) {
			return nil, errdefs.InvalidField(a.field, "%q is not a loopback address: serving there needs TLS (--tls-cert and --tls-key; see 'toolscope certs'), or use %s 127.0.0.1:PORT", a.addr, a.flag)
		}
	}
	if t.CertFile == "" && t.KeyFile == "" {
		if t.ClientCA != "" {
			return nil, errdefs.InvalidField("tls_cert", "--client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errdefs.InvalidField("tls_cert", "--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, errdefs.InvalidField("tls_cert", "load %s and %s: %v", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if t.ClientCA != "" {
		pem, err := os.ReadFile(t.ClientCA)
		if err != nil {
			return nil, errdefs.InvalidField("client_ca", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errdefs.InvalidField("client_ca", "%s holds no PEM certificate", t.ClientCA)
		}
		// A client certificate is verified if given; without one, the
		// caller needs an API token.
		c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return c, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenSocket listens on the Unix socket at path, mode 0600. A stale
// socket (nobody answers) is replaced; a live one is another orchestrator
// on the same data directory, and an error.
func listenSocket(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, errdefs.InvalidField("data_dir", "the socket path %s is longer than %d bytes; use a shorter --data-dir", path, maxSocketPath)
	}
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != fs.ModeSocket {
			return nil, errdefs.FailedPrecondition("%s exists and is not a socket; move it away", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			holder := holderOf(c)
			_ = c.Close()
			return nil, errdefs.FailedPrecondition("another orchestrator%s serves on %s (same data directory); stop it first, or use another --data-dir", holder, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The directory is 0700 already; the socket's own mode is the second
	// line, and the peer-uid check (package access) the third.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = lis.Close()
		return nil, err
	}
	return lis, nil
}

// holderOf names the process listening at the other end of a Unix socket
// connection, " (pid N)", read with SO_PEERCRED; empty if unknown.
func holderOf(c net.Conn) string {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ""
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ""
	}
	var cred *unix.Ucred
	if err := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cred == nil || cred.Pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", cred.Pid)
}

// Method is one RPC the server serves.
type Method struct {
	Name                       string // full name: /package.Service/Method
	ClientStream, ServerStream bool
}

// Methods lists every RPC the server registers (the public API, health
// checking and reflection), sorted by name: what access.Table must cover.
func Methods() []Method {
	srv := grpc.NewServer()
	registerServices(srv, nil)
	var out []Method
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, Method{Name: "/" + svc + "/" + m.Name, ClientStream: m.IsClientStream, ServerStream: m.IsServerStream})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
