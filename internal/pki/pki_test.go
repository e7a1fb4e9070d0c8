package pki_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
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
