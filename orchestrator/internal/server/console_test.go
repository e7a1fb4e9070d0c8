package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
)

// TestConsoleNeedsTLSOffLoopback: like --listen, a non-loopback console
// address without TLS is refused before anything starts.
func TestConsoleNeedsTLSOffLoopback(t *testing.T) {
	t.Parallel()
	err := server.Run(context.Background(), server.Config{DataDir: t.TempDir(), Console: "0.0.0.0:0"}, nil)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.Equal(t, "console", errdefs.FieldOf(err))
	assert.Contains(t, err.Error(), "needs TLS")
}

// TestConsoleClientCertificateLogin: with TLS and a client CA, the console
// serves HTTPS, a person logs in with a client certificate (its OU is the
// role), the cookie is Secure, and a browser without a certificate is
// offered only the token form.
func TestConsoleClientCertificateLogin(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	require.NoError(t, err)
	srvPair, err := ca.IssueServer("console", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	alice, err := ca.IssueClient("alice", time.Hour, "member")
	require.NoError(t, err)
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": ca.CertPEM, "server.crt": srvPair.CertPEM, "server.key": srvPair.KeyPEM}
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	self, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan server.Ready, 1), make(chan error, 1)
	dataDir, err := os.MkdirTemp("", "tsc-")
	require.NoError(t, err)
	defer os.RemoveAll(dataDir)
	go func() {
		done <- server.Run(ctx, server.Config{DataDir: dataDir, Agentctl: self, Console: "127.0.0.1:0",
			TLS: server.TLSConfig{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"), ClientCA: filepath.Join(dir, "ca.crt")}},
			func(r server.Ready) { ready <- r })
	}()
	defer func() { cancel(); require.NoError(t, <-done) }()
	var r server.Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(time.Minute):
		t.Fatal("the server did not start")
	}
	require.True(t, strings.HasPrefix(r.Console, "https://127.0.0.1:"), r.Console)

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM))
	client := func(withCert bool) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if withCert {
			cert, err := tls.X509KeyPair(alice.CertPEM, alice.KeyPEM)
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{cert}
		}
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		return &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: cfg},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	body := func(resp *http.Response) string {
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}

	anonymous := client(false)
	resp, err := anonymous.Get(r.Console + "/login")
	require.NoError(t, err)
	assert.NotContains(t, body(resp), "/login/certificate", "no certificate, no certificate login")

	c := client(true)
	resp, err = c.Get(r.Console + "/login")
	require.NoError(t, err)
	assert.Contains(t, body(resp), "/login/certificate")
	resp, err = c.Post(r.Console+"/login/certificate", "application/x-www-form-urlencoded", nil)
	require.NoError(t, err)
	body(resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	set := resp.Header.Get("Set-Cookie")
	assert.Contains(t, set, "Secure")
	assert.Contains(t, set, "HttpOnly")
	resp, err = c.Get(r.Console + "/sessions")
	require.NoError(t, err)
	page := body(resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, "alice")
	assert.Contains(t, page, "member")

	// The cookie alone, from a browser without the certificate, is no login.
	u := r.Console + "/sessions"
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	for _, ck := range c.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	resp, err = anonymous.Do(req)
	require.NoError(t, err)
	body(resp)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
}
