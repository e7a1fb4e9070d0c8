package access

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
)

// PeerInfo is the AuthInfo of a connection on the orchestrator's Unix
// socket: the connecting process's uid, read with SO_PEERCRED.
type PeerInfo struct {
	credentials.CommonAuthInfo
	UID uint32
}

// AuthType implements credentials.AuthInfo.
func (PeerInfo) AuthType() string { return "unix-peer" }

// plainInfo is the AuthInfo of a plain TCP connection: no identity.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

// transport is one server's transport credentials for all its listeners:
// a Unix socket connection records its peer's uid, a TCP connection
// completes the TLS handshake when TLS is configured, and is plain (on
// loopback only; the server refuses anything else) when it is not.
type transport struct {
	tls credentials.TransportCredentials // nil: plain TCP
}

// Transport returns the server's transport credentials. tlsConfig, if not
// nil, applies to TCP connections.
func Transport(tlsConfig *tls.Config) credentials.TransportCredentials {
	t := &transport{}
	if tlsConfig != nil {
		t.tls = credentials.NewTLS(tlsConfig)
	}
	return t
}

func (t *transport) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if uc, ok := conn.(*net.UnixConn); ok {
		uid, err := peerUID(uc)
		if err != nil {
			return nil, nil, err
		}
		return conn, PeerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, UID: uid}, nil
	}
	if t.tls != nil {
		return t.tls.ServerHandshake(conn)
	}
	return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func peerUID(uc *net.UnixConn) (uint32, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

func (t *transport) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("access: server-side transport credentials only")
}

func (t *transport) Info() credentials.ProtocolInfo {
	if t.tls != nil {
		return t.tls.Info()
	}
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

func (t *transport) Clone() credentials.TransportCredentials {
	c := *t
	if t.tls != nil {
		c.tls = t.tls.Clone()
	}
	return &c
}

//nolint:staticcheck // required by the interface
func (t *transport) OverrideServerName(string) error { return nil }
