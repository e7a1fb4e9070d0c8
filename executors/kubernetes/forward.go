package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// forwarder relays connections made to local listeners (on 127.0.0.1)
// to ports of a pod, through the API server's port-forward subresource:
// what an orchestrator outside the cluster reaches agentctl and the MCP
// endpoint by. Each relayed connection gets an upgraded connection to the
// API server of its own, carrying its pair of streams (one shared
// connection let a stalled stream creation reset every other relayed
// connection); a listener's address never changes.
// TLS between the orchestrator and agentctl runs inside the relayed bytes,
// end to end.
type forwarder struct {
	// dialer makes a dialer per relayed connection: client-go's
	// WebSocket dialer keeps the connection it negotiated in its round
	// tripper, so one dialer must not dial twice at once. Guarded by mu
	// (a test replaces it).
	dialer func() (httpstream.Dialer, error)
	log    *slog.Logger
	// grpcAddr and mcpAddr are the local addresses relayed to agentctl's
	// ports.
	grpcAddr, mcpAddr string

	mu     sync.Mutex
	conns  map[httpstream.Connection]bool // one per relayed connection
	closed bool
	done   chan struct{} // closed by close
	lis    []net.Listener
	nextID atomic.Int64
}

// relays are the process's forwarders, by pod (namespace/name/uid).
// They outlive the Executor that made them, as a published port outlives
// its docker client: an executor re-created over the same handles (a
// re-attach) finds the same addresses, so an MCP URL stays valid for the
// process's lifetime. A pod's relay ends with its session (stopped or
// lost).
var relays = struct {
	sync.Mutex
	m map[string]*forwarder
}{m: map[string]*forwarder{}}

// relayFor returns the relay of a pod, starting it if there is none.
func relayFor(cfg *rest.Config, client kubernetes.Interface, namespace, pod, uid string, log *slog.Logger) (*forwarder, error) {
	key := namespace + "/" + pod + "/" + uid
	relays.Lock()
	defer relays.Unlock()
	if f := relays.m[key]; f != nil {
		return f, nil
	}
	if _, err := newDialer(cfg, client, namespace, pod); err != nil { // the configuration is usable
		return nil, err
	}
	f := &forwarder{dialer: func() (httpstream.Dialer, error) { return newDialer(cfg, client, namespace, pod) },
		log: log, conns: map[httpstream.Connection]bool{}, done: make(chan struct{})}
	var err error
	if f.grpcAddr, err = f.listen(GRPCPort); err == nil {
		f.mcpAddr, err = f.listen(MCPPort)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	relays.m[key] = f
	return f, nil
}

// dropRelay ends a pod's relay, if it has one.
func dropRelay(namespace, pod, uid string) {
	key := namespace + "/" + pod + "/" + uid
	relays.Lock()
	f := relays.m[key]
	delete(relays.m, key)
	relays.Unlock()
	if f != nil {
		f.close()
	}
}

// newDialer dials the pod's port-forward subresource: over WebSocket
// (SPDY tunnelled), falling back to SPDY for API servers without it, as
// kubectl does.
func newDialer(cfg *rest.Config, client kubernetes.Interface, namespace, pod string) (httpstream.Dialer, error) {
	url := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	ws, err := portforward.NewSPDYOverWebsocketDialer(url, cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialer(ws, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// listen relays a new local listener to the pod's port and returns its
// address.
func (f *forwarder) listen(port int) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		_ = lis.Close()
		return "", net.ErrClosed
	}
	f.lis = append(f.lis, lis)
	f.mu.Unlock()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go f.relay(c, port)
		}
	}()
	return lis.Addr().String(), nil
}

// stream dials an upgraded connection of its own for one relayed
// connection: a stream pair that stalls or fails takes no other
// connection with it.
func (f *forwarder) stream() (httpstream.Connection, error) {
	f.mu.Lock()
	closed, newDialer := f.closed, f.dialer
	f.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	dialer, err := newDialer()
	if err != nil {
		return nil, fmt.Errorf("port-forward through the API server: %w", err)
	}
	conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("port-forward through the API server: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = conn.Close()
		return nil, net.ErrClosed
	}
	f.conns[conn] = true
	return conn, nil
}

// relayAttempts bounds the tries to open a relayed connection's streams
// through the API server, relayRetry the wait between two: a transient
// failure there (an API server or kubelet busy under load) should not cut
// a connection the client has just opened, while nothing of it has been
// read yet.
const (
	relayAttempts = 3
	relayRetry    = 100 * time.Millisecond
)

// relay copies between a local connection and the pod's port.
func (f *forwarder) relay(local net.Conn, port int) {
	defer local.Close()
	var (
		conn            httpstream.Connection
		errStream, data httpstream.Stream
		err             error
	)
	for attempt := 1; ; attempt++ {
		conn, errStream, data, err = f.open(port)
		if err == nil {
			break
		}
		if attempt == relayAttempts || errors.Is(err, net.ErrClosed) {
			f.log.Debug("port-forward", "port", port, "attempts", attempt, "error", err)
			return
		}
		select {
		case <-f.done:
			return
		case <-time.After(relayRetry):
		}
	}
	defer f.forget(conn)
	defer conn.RemoveStreams(errStream, data)
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case err != nil:
			remoteErr <- err
		case len(msg) > 0:
			remoteErr <- errors.New(string(msg))
		default:
			remoteErr <- nil
		}
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(local, data); done <- struct{}{} }()
	go func() { _, _ = io.Copy(data, local); _ = data.Close(); done <- struct{}{} }()
	<-done
	_ = data.Reset()
	select {
	case err := <-remoteErr:
		if err != nil {
			f.log.Debug("port-forward: the pod's end", "port", port, "error", err)
		}
	default:
	}
}

// open dials an upgraded connection for one relayed connection and opens
// its error and data streams to the pod's port.
func (f *forwarder) open(port int) (httpstream.Connection, httpstream.Stream, httpstream.Stream, error) {
	conn, err := f.stream()
	if err != nil {
		return nil, nil, nil, err
	}
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(port))
	headers.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(f.nextID.Add(1), 10))
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		f.forget(conn)
		return nil, nil, nil, fmt.Errorf("port-forward: error stream: %w", err)
	}
	_ = errStream.Close() // nothing is written to it
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		conn.RemoveStreams(errStream)
		f.forget(conn)
		return nil, nil, nil, fmt.Errorf("port-forward: data stream: %w", err)
	}
	return conn, errStream, data, nil
}

// forget closes one relayed connection's upgraded connection.
func (f *forwarder) forget(conn httpstream.Connection) {
	f.mu.Lock()
	delete(f.conns, conn)
	f.mu.Unlock()
	_ = conn.Close()
}

// close stops the listeners and the relayed connections.
func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		close(f.done)
	}
	f.closed = true
	for _, l := range f.lis {
		_ = l.Close()
	}
	for c := range f.conns {
		_ = c.Close()
	}
	clear(f.conns)
}
