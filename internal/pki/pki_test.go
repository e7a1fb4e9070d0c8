package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/pki"
)

// handshake runs a real TLS 1.3 handshake over loopback TCP and returns
// the client's error and the server's.
func handshake(t *testing.T, server, client *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		done <- tls.Server(conn, server).Handshake()
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	conn := tls.Client(raw, client)
	clientErr = conn.Handshake()
	if clientErr == nil {
		// TLS 1.3 reports a refused client certificate as an alert on the
		// first read; after an accepted handshake the server just closes.
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, rerr := conn.Read(make([]byte, 1)); !errors.Is(rerr, io.EOF) {
			clientErr = rerr
		}
	}
	_ = conn.Close()
	return clientErr, <-done
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("toolscope test CA", time.Hour)
	require.NoError(t, err)
	other, err := pki.NewCA("someone else", time.Hour)
	require.NoError(t, err)
	serverPair, err := ca.IssueServer("agentctl", []string{"127.0.0.1", "localhost"}, time.Hour)
	require.NoError(t, err)
	clientPair, err := ca.IssueClient("orchestrator", time.Hour)
	require.NoError(t, err)
	strangerPair, err := other.IssueClient("stranger", time.Hour)
	require.NoError(t, err)

	serverCfg, err := pki.ServerConfig(serverPair, ca.CertPEM)
	require.NoError(t, err)
	good, err := pki.ClientConfig(clientPair, ca.CertPEM)
	require.NoError(t, err)
	good.ServerName = "127.0.0.1"

	clientErr, serverErr := handshake(t, serverCfg, good)
	assert.NoError(t, clientErr)
	assert.NoError(t, serverErr)

	stranger, err := pki.ClientConfig(strangerPair, ca.CertPEM)
	require.NoError(t, err)
	stranger.ServerName = "127.0.0.1"
	_, serverErr = handshake(t, serverCfg, stranger)
	assert.Error(t, serverErr, "a client certificate from another CA is refused")

	noCert := &tls.Config{RootCAs: good.RootCAs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	_, serverErr = handshake(t, serverCfg, noCert)
	assert.Error(t, serverErr, "a client without a certificate is refused")

	wrongCA, err := pki.ClientConfig(clientPair, other.CertPEM)
	require.NoError(t, err)
	wrongCA.ServerName = "127.0.0.1"
	clientErr, _ = handshake(t, serverCfg, wrongCA)
	assert.Error(t, clientErr, "a server certificate from an untrusted CA is refused")

	loaded, err := pki.LoadCA(ca.CertPEM, ca.KeyPEM)
	require.NoError(t, err)
	again, err := loaded.IssueClient("orchestrator-2", time.Hour)
	require.NoError(t, err)
	reloaded, err := pki.ClientConfig(again, ca.CertPEM)
	require.NoError(t, err)
	reloaded.ServerName = "localhost"
	clientErr, serverErr = handshake(t, serverCfg, reloaded)
	assert.NoError(t, clientErr)
	assert.NoError(t, serverErr)
}

// TestSerialsAsPeopleCopyThem: a serial is read whatever its case, ':'
// separators or 0x prefix, into the one form revocations name; anything
// that is not a certificate's serial is refused, naming what was typed.
func TestSerialsAsPeopleCopyThem(t *testing.T) {
	for in, want := range map[string]string{
		"3AF2": "3af2", "3a:f2": "3af2", "0x3af2": "3af2", " 003AF2 ": "3af2", "01": "1",
	} {
		got, err := pki.ParseSerial(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "xyz", "0", "-3af2", "+3af2", "3af2 99", strings.Repeat("f", 41)} {
		_, err := pki.ParseSerial(in)
		assert.Error(t, err, "%q", in)
		if in != "" {
			assert.ErrorContains(t, err, fmt.Sprintf("%q", in))
		}
	}
	ca, err := pki.NewCA("ca", time.Hour)
	require.NoError(t, err)
	pair, err := ca.IssueClient("alice", time.Hour, "member")
	require.NoError(t, err)
	block, _ := pem.Decode(pair.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	got, err := pki.ParseSerial(strings.ToUpper(pki.Serial(cert)))
	require.NoError(t, err)
	assert.Equal(t, pki.Serial(cert), got)
}

// TestOnlyTheOrchestratorsCertificateIsTheOrchestrator: agentctl accepts
// the certificate certs init issues (OU orchestrator) and one from before
// it was marked (no OU), never one carrying an API caller's role.
func TestOnlyTheOrchestratorsCertificateIsTheOrchestrator(t *testing.T) {
	ca, err := pki.NewCA("ca", time.Hour)
	require.NoError(t, err)
	parse := func(p pki.Pair, err error) *x509.Certificate {
		t.Helper()
		require.NoError(t, err)
		block, _ := pem.Decode(p.CertPEM)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return cert
	}
	assert.NoError(t, pki.CheckOrchestrator(parse(ca.IssueOrchestrator("orchestrator", time.Hour))))
	assert.NoError(t, pki.CheckOrchestrator(parse(ca.IssueClient("orchestrator", time.Hour))), "from before the mark")
	for _, units := range [][]string{{"viewer"}, {"admin"}, {"orchestrator", "admin"}, {"ops"}} {
		err := pki.CheckOrchestrator(parse(ca.IssueClient("alice", time.Hour, units...)))
		assert.ErrorContains(t, err, `client certificate "alice"`, "%v", units)
	}
}
