package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// The load case of the reliability issue: one agentctl, one session,
// loadRate SetProviders per second for loadSpan, while loadListers MCP
// clients list tools and loadCallers clients call tools, over every
// protocol generation the daemon serves.
const (
	loadSession = "load"
	loadListers = 50
	loadCallers = 50
	loadRate    = 100 // SetProviders per second
	loadSpan    = 10 * time.Second

	// loadCallWait bounds one tool call from the client's side: beyond the
	// daemon's CallTimeout (10 s in the harness), so a call the daemon
	// gave up on still comes back refused with a code, and only a hung
	// call runs into it.
	loadCallWait = 20 * time.Second
)

// envLoad turns the load storm on; make test-long sets it and runs the
// storm alone.
const envLoad = "TOOLSCOPE_LOAD"

// The storm has no timing bound: timing goals belong in benchmarks, and
// the figures record what was measured. Its starvation guard counts in
// pushes instead (loadWindow): every listening client must hear
// list_changed during every loadWindow consecutive pushes, which a
// debounce that never fires under churn fails at any speed, and a slow or
// busy machine does not (it slows the pushes as much as the
// notifications). The goal for the gap is 100 ms; the longest gap
// measured 44–53 ms in November, 63–121 ms on 2026-12-01 with the test
// alone taking 1.7 of the 2 cores, 258–496 ms in whole-process stalls
// (every client waiting at once), and under -race 71–134 ms on a quiet
// machine but 2.8 s beside other work, with pushes taking up to 1.2 s
// (docs/reliability.md §8.8): a bound in seconds failed there with no
// client starved.
//
// The storm is 1,000 pushes, each of which changes the tool list, paced at
// loadRate and caught up when late. How fast the pusher gets through them
// is a figure: the pusher is the test's own loop and shares the 2 cores
// with 100 clients, so its rate says how much CPU they leave it on this
// machine today (99/s, then 9.6–14/s on the same code on 2026-12-01), not
// anything about the daemon. What the test requires instead is that the
// storm reached every lister: each saw the tool list change under it
// between two of its own listings (reads interleaved with writes), which
// holds at any speed unless a lister or the pusher is starved outright.
//
// loadEvery paces each lister's and caller's loop, staggered across
// clients: one tools/list or tools/call per client every 100 ms (500
// listings and 500 calls per second in all) without the race detector,
// every second under it. Back-to-back loops saturate both cores of a
// 2-core machine under -race by themselves (over half of it in the race
// runtime, and of the rest the test's go-sdk clients twice the daemon's
// share): the pusher then managed 6–8 SetProviders per second instead of
// 100.
var loadEvery = map[bool]time.Duration{false: 100 * time.Millisecond, true: time.Second}[raceDetector]

// loadWindow is the starvation guard: pushes during which every client
// must have heard list_changed at least once.
const loadWindow = 100

// loadSets are pushed in turn: each differs from the one before, so every
// push changes the effective tool list, and their surfaces are distinct,
// so a listing names the one set it shows.
var loadSets = [][]string{{"github"}, {"gitlab"}, {"github", "gitlab"}, nil}

func loadSet(gen uint64) []string { return loadSets[gen%uint64(len(loadSets))] }

// loadCalls are what callers call in turn: task tools (always listed),
// provider tools of both providers (listed or not, depending on the push
// in force), and a malformed call that agentctl refuses when the tool is
// listed.
var loadCalls = []loadCallSpec{
	{"task_info", map[string]any{}},
	{toolapi.GitHubPRStatus, map[string]any{"repository_id": "repo_1"}},
	{"session_info", map[string]any{}},
	{toolapi.GitLabMRStatus, map[string]any{"repository_id": "repo_2"}},
	{"task_inbox", map[string]any{}},
	{toolapi.GitHubPRComments, map[string]any{}},
	{toolapi.GitLabMRReply, map[string]any{"thread_id": "t1", "body": "done"}},
	{toolapi.GitHubPRStatus, map[string]any{"repository_id": 42}},
}

type loadCallSpec struct {
	name string
	args map[string]any
}

// refusalCode is the code an IsError result starts with ("code: message").
var refusalCode = regexp.MustCompile(`^([a-z][a-z0-9_]*): `)

// TestLoadPushStormKeepsListsWholeNotifiesListenersAndAnswersCalls: 1,000
// SetProviders, paced at up to 100 per second, against one agentctl with
// 50 MCP listers and 50 tool callers, all listening for list_changed. No
// listing is torn, every lister sees the list change under it, the final
// list is the last generation's surface, no client goes 100 pushes without
// list_changed, every call is answered or refused with a code, and no
// goroutine outlives the daemon.
func TestLoadPushStormKeepsListsWholeNotifiesListenersAndAnswersCalls(t *testing.T) {
	if os.Getenv(envLoad) == "" {
		testutil.Skip(t, "the load storm runs on its own, with and without -race, in make test-long (%s=1): "+
			"on 2 cores its 10 s of load would disturb the timing of the tests running beside it", envLoad)
	}
	// Not parallel: goleak compares with the goroutines running now, and
	// the package's parallel tests only start once the sequential ones are
	// done. The storm runs as a subtest so that its cleanups (clients,
	// Attach stream, gRPC, daemon) have all run before the check.
	current := goleak.IgnoreCurrent()
	t.Run("storm", loadStorm)
	err := goleak.Find(current)
	leaked := 0
	if err != nil {
		leaked = strings.Count(err.Error(), "Goroutine ")
	}
	testutil.Figure(t, "load storm goroutines leaked", "%d", leaked)
	assert.NoError(t, err, "goroutines outlived the daemon and its clients")
}

// loadClient is one MCP client of the storm.
type loadClient struct {
	*mcptest.Client
	version string // as asked for; "" is the client's default, 2026-07-28
	lister  bool

	// A lister's own loop alone writes these; they are read once its loop
	// has ended.
	listed  string // the surface its last whole listing showed
	changes int    // whole listings that showed another surface than the one before
}

func loadStorm(t *testing.T) {
	setupStart := time.Now()
	h := newHarness(t)

	// The orchestrator's end: it knows the set it last pushed, as the real
	// one knows the task's attached providers, and refuses provider tools
	// outside it with a code, as toolcalls does.
	var pushedSet atomic.Pointer[providers.Set]
	var wrongIdentity atomic.Int64
	pushed := func(set []string) { s := providers.Of(set...); pushedSet.Store(&s) }
	pushed(loadSet(1))
	orchestrator(t, h, func(c *agentctlv1.ToolCall) *agentctlv1.ToolResult {
		if c.GetSessionId() != loadSession || c.GetTaskId() != "task_"+loadSession {
			wrongIdentity.Add(1)
			return &agentctlv1.ToolResult{IsError: true, ErrorCode: "permission_denied", Text: "not this task's session"}
		}
		for _, p := range providers.All() {
			if strings.HasPrefix(c.GetToolName(), string(p)+"_") && !pushedSet.Load().Has(p) {
				return &agentctlv1.ToolResult{IsError: true, ErrorCode: "provider_not_attached", Text: string(p) + " is not attached to this task"}
			}
		}
		return &agentctlv1.ToolResult{Text: "ok " + c.GetToolName()}
	})
	st := h.create(t, spec(loadSession, agentctlv1.SessionMode_SESSION_MODE_TASK, 1, loadSet(1)...))

	// The surface of every set that may be pushed, as registry.Build
	// derives it (and as toolapi states it independently).
	surfaces := map[string]bool{}
	for _, set := range loadSets {
		names := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of(set...)}).Names()
		require.Equal(t, toolapi.Surface(set...), names, "registry and toolapi agree on %v", set)
		surfaces[strings.Join(names, ",")] = true
	}
	require.Len(t, surfaces, len(loadSets), "each set shows a surface of its own")

	// Each client has its own connection pool, as each agent would: a
	// shared one makes the clients contend for its lock, and
	// http.DefaultTransport keeps only 2 idle connections per host, so 100
	// clients would churn through loopback ports.
	token := h.token(t, loadSession)
	var pools []*http.Transport
	t.Cleanup(func() {
		for _, p := range pools {
			p.CloseIdleConnections()
		}
	})
	clients := make([]*loadClient, 0, loadListers+loadCallers)
	for i := range loadListers + loadCallers {
		version := mcptest.ProtocolVersions[i%len(mcptest.ProtocolVersions)]
		pool := http.DefaultTransport.(*http.Transport).Clone()
		pools = append(pools, pool)
		tr := &mcp.StreamableClientTransport{Endpoint: st.GetMcpUrl(), MaxRetries: -1,
			HTTPClient: &http.Client{Transport: mcptest.Bearer(token, pool)}}
		c := mcptest.ConnectCounting(t, tr, version)
		require.Equal(t, mcptest.Expected(version), c.Negotiated())
		clients = append(clients, &loadClient{Client: c, version: version, lister: i < loadListers})
	}

	var (
		gen                      = uint64(1)
		pushes, applied, changed int
		failed                   []string
		roundTrips               []time.Duration
		sentAt, ackedAt          []time.Time // of each push
	)
	push := func() {
		gen++
		set := loadSet(gen)
		pushed(set)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		began := time.Now()
		resp, err := h.client.SetProviders(ctx, &agentctlv1.SetProvidersRequest{
			SessionId: loadSession, ProviderSet: &agentctlv1.ProviderSet{Providers: set, Generation: gen}})
		acked := time.Now()
		roundTrips = append(roundTrips, acked.Sub(began))
		sentAt, ackedAt = append(sentAt, began), append(ackedAt, acked)
		pushes++
		switch {
		case err != nil:
			failed = append(failed, fmt.Sprintf("generation %d: %v", gen, err))
		case resp.GetAccepted():
			applied++
			if resp.GetToolsChanged() {
				changed++
			}
		}
	}
	loadSubscribe(t, clients, push)
	pushes, applied, changed, roundTrips, sentAt, ackedAt = 0, 0, 0, nil, nil, nil

	// The storm.
	stop := make(chan struct{})
	var workers sync.WaitGroup
	lists := &listTally{}
	calls := &callTally{refused: map[string]int{}}
	for i, c := range clients {
		phase := loadEvery * time.Duration(i) / time.Duration(len(clients))
		if c.lister {
			workers.Go(func() { paced(stop, phase, func() { loadList(c, surfaces, lists) }) })
		} else {
			next := i
			workers.Go(func() { paced(stop, phase, func() { next++; loadCall(c, loadCalls[next%len(loadCalls)], calls) }) })
		}
	}
	// Push i is due at start + i/loadRate. A push that comes back late
	// does not cost the storm a push (a ticker would drop the missed
	// ticks): the next ones go at once until the schedule is met again.
	cpuBefore, schedBefore := readCPU(), readSched()
	start := time.Now()
	pace := time.NewTimer(0)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * time.Second / loadRate)
		if due.Sub(start) >= loadSpan {
			break
		}
		pace.Reset(time.Until(due))
		<-pace.C
		push()
	}
	pace.Stop()
	end := time.Now()
	cpu := readCPU().since(cpuBefore, end.Sub(start)) + "; " + readSched().since(schedBefore)
	close(stop)
	workers.Wait()
	lastGen, lastSet := gen, loadSet(gen)

	// After the storm, every client lists the last generation's surface.
	// A push may still be coalescing when the storm ends: a client that
	// sees an older surface waits for the notification that follows.
	final := toolapi.Surface(lastSet...)
	for _, c := range clients {
		deadline := time.After(10 * time.Second)
		for {
			names, err := listNames(c.Session)
			require.NoError(t, err)
			if slices.Equal(final, names) {
				break
			}
			select {
			case <-c.Changed():
			case <-deadline:
				t.Fatalf("a client (protocol %s) still lists %v, not the last generation's %v", mcptest.VersionName(c.version), names, final)
			}
		}
	}
	state, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: loadSession})
	require.NoError(t, err)
	assert.Equal(t, lastGen, state.GetStatus().GetProviderSet().GetGeneration())
	assert.Equal(t, providers.Of(lastSet...), providers.Of(state.GetStatus().GetProviderSet().GetProviders()...))
	assert.Equal(t, final, state.GetStatus().GetToolNames())

	// Gaps between notifications during the storm, per client, from the
	// storm's first push to its end (figures); and the clients that heard
	// nothing during loadWindow consecutive pushes, from the first one's
	// sending to the last one's answer (the guard).
	var (
		gaps      []time.Duration
		notified  int
		worst     = map[string]time.Duration{} // by protocol
		starved   []string
		worstGap  time.Duration
		worstName string
	)
	for _, c := range clients {
		arrivals := c.Arrivals()
		for first := 0; first < len(sentAt); first += loadWindow {
			last := min(first+loadWindow, len(sentAt)) - 1
			from, to := sentAt[first], ackedAt[last]
			if !slices.ContainsFunc(arrivals, func(at time.Time) bool { return !at.Before(from) && !at.After(to) }) {
				starved = append(starved, fmt.Sprintf("%s: pushes %d–%d (%s)", mcptest.VersionName(c.version),
					first+1, last+1, to.Sub(from).Round(time.Millisecond)))
			}
		}
		last, mine := start, time.Duration(0)
		gap := func(until time.Time) {
			gaps = append(gaps, until.Sub(last))
			mine = max(mine, until.Sub(last))
			last = until
		}
		for _, at := range arrivals {
			if !at.Before(start) && !at.After(end) {
				gap(at)
				notified++
			}
		}
		gap(end) // a silence at the storm's end counts too
		name := mcptest.VersionName(c.version)
		worst[name] = max(worst[name], mine)
		if mine > worstGap {
			worstGap, worstName = mine, name
		}
	}
	slices.Sort(gaps)
	slices.Sort(roundTrips)
	// Whether the storm reached every lister (its loop has ended).
	var (
		seen      int
		fewest    = -1
		unreached []string
	)
	for _, c := range clients {
		if !c.lister {
			continue
		}
		seen += c.changes
		if fewest < 0 || c.changes < fewest {
			fewest = c.changes
		}
		if c.changes == 0 {
			unreached = append(unreached, mcptest.VersionName(c.version))
		}
	}
	span := end.Sub(start).Seconds()

	testutil.Figure(t, "load storm pushes", "%d SetProviders in %.1f s (%.1f/s, round trip p50 %s, max %s): "+
		"%d applied, %d changed the tool list, %d failed",
		pushes, span, float64(pushes)/span, percentile(roundTrips, 50).Round(time.Microsecond),
		roundTrips[len(roundTrips)-1].Round(time.Millisecond), applied, changed, len(failed))
	lists.mu.Lock()
	testutil.Figure(t, "load storm listings", "%d tools/list by %d listers (%.0f/s): %d torn, %d failed%s; "+
		"%d showed a change from the lister's previous listing (fewest by one lister %d)",
		lists.done+lists.torn+lists.failed, loadListers, float64(lists.done+lists.torn+lists.failed)/span, lists.torn, lists.failed,
		examples(lists.examples), seen, fewest)
	testutil.Figure(t, "load storm notifications", "%d list_changed to %d clients (%.1f per client per second); "+
		"longest gap %s (protocol %s), p99 %s; %d heard nothing during %d pushes (race detector: %v)",
		notified, len(clients), float64(notified)/float64(len(clients))/span,
		worstGap.Round(time.Millisecond), worstName, percentile(gaps, 99).Round(time.Millisecond), len(starved), loadWindow, raceDetector)
	calls.mu.Lock()
	refused, codes := 0, []string{}
	for code, n := range calls.refused {
		refused += n
		codes = append(codes, fmt.Sprintf("%s %d", code, n))
	}
	sort.Strings(codes)
	testutil.Figure(t, "load storm calls", "%d tools/call by %d callers: %d answered, %d refused with a code (%s), %d unaccounted",
		calls.answered+refused+calls.unaccounted, loadCallers, calls.answered, refused, strings.Join(codes, ", "), calls.unaccounted)
	testutil.Figure(t, "load storm cpu", "%s", cpu)
	t.Logf("longest gap by protocol: %v; setup %s", worst, start.Sub(setupStart).Round(time.Millisecond))

	assert.Empty(t, failed, "every push is acknowledged")
	assert.Equal(t, pushes, applied, "every push has a newer generation than the last")
	assert.Equal(t, pushes, changed, "every push changes the tool list")
	assert.Empty(t, unreached, "listers that never saw the tool list change between two of their listings: "+
		"the storm did not reach them (CPU: %s)", cpu)

	assert.Zero(t, lists.torn, "torn listings, e.g. %v", lists.examples)
	assert.Zero(t, lists.failed, "failed listings, e.g. %v", lists.examples)
	assert.Positive(t, lists.done)
	lists.mu.Unlock()

	assert.Empty(t, starved, "clients that heard no list_changed during %d pushes (CPU: %s)", loadWindow, cpu)

	assert.Zero(t, calls.unaccounted, "calls neither answered nor refused with a code, e.g. %v", calls.examples)
	assert.Positive(t, calls.answered)
	for _, code := range []string{"orchestrator_unreachable", "timeout", "unavailable", "internal", "permission_denied"} {
		assert.Zero(t, calls.refused[code], "calls refused with %s while the orchestrator was attached and answering", code)
	}
	assert.Zero(t, wrongIdentity.Load(), "calls reached the orchestrator with another session's identity")
	calls.mu.Unlock()

	// Close every client now (the cleanups would too) so that the
	// teardown's goroutines are gone by the leak check.
	for _, c := range clients {
		_ = c.Session.Close()
	}
	for _, p := range pools {
		p.CloseIdleConnections()
	}
}

// loadSubscribe makes every client's list_changed subscription live before
// the storm: 2026-07-28 clients subscribe and older ones open their GET
// stream asynchronously. It pushes a change, and another each time a
// client has heard nothing for half a second.
func loadSubscribe(t *testing.T, clients []*loadClient, push func()) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	push()
	for _, c := range clients {
		for heard := false; !heard; {
			select {
			case <-c.Changed():
				heard = true
			case <-time.After(500 * time.Millisecond):
				push()
			case <-deadline:
				t.Fatalf("a client (protocol %s) heard no list_changed", mcptest.VersionName(c.version))
			}
		}
	}
	for _, c := range clients {
		c.Drain()
	}
}

// paced runs op every loadEvery (back to back if it is zero), the first
// time after phase, until stop.
func paced(stop <-chan struct{}, phase time.Duration, op func()) {
	first := time.NewTimer(phase)
	defer first.Stop()
	select {
	case <-stop:
		return
	case <-first.C:
	}
	var next <-chan time.Time
	if loadEvery > 0 {
		tick := time.NewTicker(loadEvery)
		defer tick.Stop()
		next = tick.C
	}
	for {
		op()
		if next == nil {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		select {
		case <-stop:
			return
		case <-next:
		}
	}
}

type listTally struct {
	mu                 sync.Mutex
	done, torn, failed int
	examples           []string
}

// loadList lists tools once: the listing must be the whole surface of one
// of loadSets.
func loadList(c *loadClient, surfaces map[string]bool, tally *listTally) {
	c.Drain() // the arrival times are kept; the channel must not fill up
	names, err := listNames(c.Session)
	tally.mu.Lock()
	defer tally.mu.Unlock()
	switch {
	case err != nil:
		tally.failed++
	case !surfaces[strings.Join(names, ",")]:
		tally.torn++
	default:
		tally.done++
		surface := strings.Join(names, ",")
		if c.listed != "" && c.listed != surface {
			c.changes++
		}
		c.listed = surface
		return
	}
	if len(tally.examples) < 5 {
		tally.examples = append(tally.examples, fmt.Sprintf("%s: %v %v", mcptest.VersionName(c.version), names, err))
	}
}

// examples is what went wrong, for a figure line: make test-long shows
// figure lines, and a failure's reason must be in the log of the run that
// had it (one listing in 54,694 failed in a fresh-clone run on
// 2026-12-01, 116 s into a storm, and its reason was filtered out).
func examples(e []string) string {
	if len(e) == 0 {
		return ""
	}
	return fmt.Sprintf(" (e.g. %s)", strings.Join(e, "; "))
}

// listNames lists the session's tools in one page, sorted.
func listNames(cs *mcp.ClientSession) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	if res.NextCursor != "" {
		return nil, errors.New("tools/list was paginated")
	}
	names := make([]string, 0, len(res.Tools))
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names, nil
}

type callTally struct {
	mu                    sync.Mutex
	answered, unaccounted int
	refused               map[string]int // by code
	examples              []string
}

// loadCall calls one tool and accounts for the outcome: answered, refused
// with a code (an IsError result "code: message", or a JSON-RPC error), or
// neither.
func loadCall(c *loadClient, call loadCallSpec, tally *callTally) {
	c.Drain() // the arrival times are kept; the channel must not fill up
	ctx, cancel := context.WithTimeout(context.Background(), loadCallWait)
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: call.name, Arguments: call.args})
	cancel()
	code, ok := "", false
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		code, ok = fmt.Sprintf("jsonrpc %d", rpcErr.Code), true
	case err != nil:
		code = "error: " + err.Error()
	case len(res.Content) == 0:
		code = "no content"
	case !res.IsError:
		text, _ := res.Content[0].(*mcp.TextContent)
		if ok = text != nil && text.Text == "ok "+call.name; !ok {
			code = fmt.Sprintf("unexpected answer %v", res.Content[0])
		}
	default:
		text, _ := res.Content[0].(*mcp.TextContent)
		if text == nil {
			code = fmt.Sprintf("refused without text: %v", res.Content[0])
		} else if m := refusalCode.FindStringSubmatch(text.Text); m != nil {
			code, ok = m[1], true
		} else {
			code = "refused without a code: " + text.Text
		}
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	switch {
	case !ok:
		tally.unaccounted++
		if len(tally.examples) < 5 {
			tally.examples = append(tally.examples, fmt.Sprintf("%s (%s): %s", call.name, mcptest.VersionName(c.version), code))
		}
	case code == "":
		tally.answered++
	default:
		tally.refused[code]++
	}
}

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)*p+99)/100-1]
}

// cpuSample is what Linux reports of CPU use at one moment: the machine's
// busy and total time over all CPUs, and this process's user and system
// time. The storm's timing depends on the CPU it gets, so its figures say
// how much of the machine it had.
type cpuSample struct {
	busy, total, own uint64 // clock ticks
	ok               bool
}

func readCPU() cpuSample {
	stat, err1 := os.ReadFile("/proc/stat")
	self, err2 := os.ReadFile("/proc/self/stat")
	if err1 != nil || err2 != nil {
		return cpuSample{}
	}
	var s cpuSample
	line, _, _ := strings.Cut(string(stat), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		s.total += v
		if i != 3 && i != 4 { // idle, iowait
			s.busy += v
		}
	}
	// utime and stime are the 14th and 15th fields, the 12th and 13th
	// after the command name (which may hold spaces, and ends with ')').
	_, rest, _ := strings.Cut(string(self), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return cpuSample{}
	}
	utime, _ := strconv.ParseUint(fields[11], 10, 64)
	stime, _ := strconv.ParseUint(fields[12], 10, 64)
	s.own, s.ok = utime+stime, true
	return s
}

// since describes the CPU used from before to s, over wall.
func (s cpuSample) since(before cpuSample, wall time.Duration) string {
	if !s.ok || !before.ok || s.total <= before.total {
		return "not measured"
	}
	cores := float64(runtime.NumCPU())
	machine := float64(s.busy-before.busy) / float64(s.total-before.total) * cores
	own := float64(s.own-before.own) / 100 / wall.Seconds() // USER_HZ is 100 on Linux
	return fmt.Sprintf("machine busy %.2f of %.0f cores: this test %.2f, other processes %.2f", machine, cores, own, max(machine-own, 0))
}

// schedSample holds the Go scheduler's histograms at one moment: how long
// goroutines waited to run once runnable, and how long GC stopped the
// world.
type schedSample struct{ latency, gcPause *metrics.Float64Histogram }

func readSched() schedSample {
	m := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindFloat64Histogram || m[1].Value.Kind() != metrics.KindFloat64Histogram {
		return schedSample{}
	}
	return schedSample{m[0].Value.Float64Histogram(), m[1].Value.Float64Histogram()}
}

// since describes the waits recorded from before to s: the scheduling
// latency's p99 and maximum, and the longest GC pause (each to the upper
// bound of its histogram bucket).
func (s schedSample) since(before schedSample) string {
	if s.latency == nil || before.latency == nil {
		return "scheduler not measured"
	}
	p99, longest := histDelta(s.latency, before.latency, 0.99)
	_, pause := histDelta(s.gcPause, before.gcPause, 1)
	return fmt.Sprintf("goroutines waited to run p99 ≤%s, max ≤%s; GC pauses ≤%s",
		p99.Round(10*time.Microsecond), longest.Round(10*time.Microsecond), pause.Round(10*time.Microsecond))
}

// histDelta returns the q-quantile and the largest value of the samples
// added between before and now, as bucket upper bounds.
func histDelta(now, before *metrics.Float64Histogram, q float64) (quantile, largest time.Duration) {
	counts := make([]uint64, len(now.Counts))
	var total uint64
	for i := range counts {
		counts[i] = now.Counts[i] - before.Counts[i]
		total += counts[i]
	}
	upper := func(i int) time.Duration {
		b := now.Buckets[i+1]
		if b > 1e9 { // +Inf
			b = now.Buckets[i]
		}
		return time.Duration(b * float64(time.Second))
	}
	var seen uint64
	for i, n := range counts {
		if n == 0 {
			continue
		}
		seen += n
		if quantile == 0 && float64(seen) >= q*float64(total) {
			quantile = upper(i)
		}
		largest = upper(i)
	}
	return quantile, largest
}
