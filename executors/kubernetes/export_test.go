package kubernetes

import (
	"crypto/tls"

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
