// Package pki creates and loads the certificates for mutual TLS between
// the orchestrator and agentctl daemons on remote hosts: one CA, a server
// certificate per agentctl host, a client certificate per orchestrator.
// Keys are ECDSA P-256; connections require TLS 1.3.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// CA is a certificate authority that issues toolscope's certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the CA's certificate and private key.
	CertPEM, KeyPEM []byte
}

// Pair is an issued certificate and its private key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA creates a self-signed CA valid for validFor.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"toolscope"}},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadCA loads a CA created by NewCA.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, errors.New("load CA: not an ECDSA certificate authority")
	}
	return &CA{cert: cert, key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// IssueServer issues a certificate for an agentctl daemon reachable at
// hosts (DNS names or IP addresses).
func (ca *CA) IssueServer(commonName string, hosts []string, validFor time.Duration) (Pair, error) {
	if len(hosts) == 0 {
		return Pair{}, errors.New("a server certificate needs at least one host")
	}
	tmpl := ca.leaf(commonName, validFor, x509.ExtKeyUsageServerAuth)
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// IssueClient issues a client certificate: an orchestrator's, for
// agentctl daemons, or an API caller's. units, if any, become the
// Subject's OrganizationalUnit; the orchestrator's API reads a caller's
// role there (viewer, member or admin).
func (ca *CA) IssueClient(commonName string, validFor time.Duration, units ...string) (Pair, error) {
	tmpl := ca.leaf(commonName, validFor, x509.ExtKeyUsageClientAuth)
	tmpl.Subject.OrganizationalUnit = units
	return ca.issue(tmpl)
}

func (ca *CA) leaf(commonName string, validFor time.Duration, usage x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"toolscope"}},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// ServerConfig is the TLS configuration of an agentctl daemon: its own
// certificate, and client certificates required and verified against
// clientCAPEM.
func ServerConfig(server Pair, clientCAPEM []byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(clientCAPEM) {
		return nil, errors.New("client CA: no certificate found")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// ClientConfig is the TLS configuration of an orchestrator connecting to
// an agentctl daemon whose certificate is signed by serverCAPEM.
func ClientConfig(client Pair, serverCAPEM []byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(serverCAPEM) {
		return nil, errors.New("server CA: no certificate found")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Serial is cert's serial number as revocations name it: lowercase hex,
// without leading zeros or separators.
func Serial(cert *x509.Certificate) string { return cert.SerialNumber.Text(16) }

// ParseSerial reads a serial number as people copy it (hex, upper or lower
// case, with or without ':' separators or a 0x prefix) into Serial's form.
// RFC 5280 serials are positive and at most 20 octets.
func ParseSerial(s string) (string, error) {
	hex := strings.TrimPrefix(strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", "")), "0x")
	n, ok := new(big.Int).SetString(hex, 16)
	if !ok || hex == "" || strings.HasPrefix(hex, "-") || strings.HasPrefix(hex, "+") {
		return "", fmt.Errorf("serial number %q is not hexadecimal (as 'openssl x509 -noout -serial' prints it)", s)
	}
	if n.Sign() <= 0 || n.BitLen() > 160 {
		return "", fmt.Errorf("serial number %q is not one of a certificate: positive, at most 20 bytes", s)
	}
	return n.Text(16), nil
}

// OrchestratorUnit is the OrganizationalUnit of the orchestrator's client
// certificate (IssueOrchestrator, 'toolscope certs init'): the one
// certificate agentctl daemons accept under mutual TLS. An API caller's
// certificate ('toolscope certs client') carries a role there instead,
// and may come from the same CA.
const OrchestratorUnit = "orchestrator"

// IssueOrchestrator issues the orchestrator's client certificate, for
// agentctl daemons.
func (ca *CA) IssueOrchestrator(commonName string, validFor time.Duration) (Pair, error) {
	return ca.IssueClient(commonName, validFor, OrchestratorUnit)
}

// CheckOrchestrator refuses a verified client certificate that is not the
// orchestrator's: one whose Subject carries an OrganizationalUnit other
// than OrchestratorUnit alone, such as an API caller's role. A certificate
// with none is one 'certs init' issued before OrchestratorUnit existed,
// and passes.
func CheckOrchestrator(cert *x509.Certificate) error {
	switch units := cert.Subject.OrganizationalUnit; {
	case len(units) == 0, len(units) == 1 && units[0] == OrchestratorUnit:
		return nil
	default:
		return fmt.Errorf("client certificate %q (serial %s) is not the orchestrator's: its OrganizationalUnit %q is an API caller's, "+
			"and agentctl accepts only the orchestrator's certificate ('toolscope certs init', OU=%s)", cert.Subject.CommonName, Serial(cert), units, OrchestratorUnit)
	}
}
