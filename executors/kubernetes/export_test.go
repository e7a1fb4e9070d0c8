package kubernetes

import (
	"crypto/tls"
	"errors"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/httpstream"

	"github.com/toolscope/toolscope/executors"
)

// Reach returns what a holder of the orchestrator's client certificate
// could reach a session's agentctl by, without the orchestrator: its gRPC
// address as this executor relays it, its MCP address, and the TLS
// configuration. For the suite's Control.
func Reach(e *Executor, h executors.Handle) (grpcAddr, mcpAddr string, cfg *tls.Config, err error) {
	s, st, err := e.lookup(h)
	if err != nil {
		return "", "", nil, err
	}
	cfg, err = e.tlsConfig(st.Pod)
	return s.fwd.grpcAddr, s.fwd.mcpAddr, cfg, err
}

// FailDials makes the next n dials of a session's relay to the API server
// fail, as a busy API server or kubelet would.
func FailDials(e *Executor, h executors.Handle, n int) error {
	s, _, err := e.lookup(h)
	if err != nil {
		return err
	}
	f := s.fwd
	var left atomic.Int32
	left.Store(int32(n))
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.dialer
	f.dialer = func() (httpstream.Dialer, error) {
		if left.Add(-1) >= 0 {
			return nil, errors.New("injected: the API server is busy")
		}
		return next()
	}
	return nil
}

// RelayAttempts is relayAttempts, for tests.
const RelayAttempts = relayAttempts
