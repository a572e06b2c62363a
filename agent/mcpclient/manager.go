package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/agent"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Where a server runs.
const (
	InWorkspace = "workspace" // a project's server: run (or dialled) inside the workspace
	OnHost      = "host"      // the user's own server: run (or dialled) on this machine
)

// Spec is one server to start: its config, where it runs, and how to
// reach it (called for each start, the restart included).
type Spec struct {
	Named
	Where   string
	Connect func() Transport
}

// The server states Status reports.
const (
	StateStarting   = "starting"
	StateRunning    = "running"
	StateRestarting = "restarting" // it died; started again, once
	StateFailed     = "failed"     // it would not start, or died twice
	StateStopped    = "stopped"    // Close was called
)

// Status is one server as /mcp and the IDE's panel show it.
type Status struct {
	Name      string   `json:"name"`
	Where     string   `json:"where"` // workspace or host
	Kind      string   `json:"kind"`  // stdio, http or sse
	Source    string   `json:"source"`
	State     string   `json:"state"`
	Error     string   `json:"error,omitempty"` // why it failed, or why it last died
	Tools     []string `json:"tools,omitempty"` // the server's names for them
	Resources int      `json:"resources,omitempty"`
	Prompts   int      `json:"prompts,omitempty"`
	Restarts  int      `json:"restarts,omitempty"`
	StartMS   int64    `json:"start_ms,omitempty"` // how long its last start took, to its tool list
	// Skipped counts the tools not offered: their names hold characters
	// other than letters, digits, _, . and -.
	Skipped int `json:"skipped,omitempty"`
}

// Limits on what a server may hand the model.
const (
	startTimeout   = 60 * time.Second
	callTimeout    = 10 * time.Minute
	maxTools       = 256     // per server
	maxListed      = 10000   // resources or prompts counted
	maxDescription = 4 << 10 // bytes of a tool's description
	maxSchema      = 64 << 10
	maxResultText  = 256 << 10
	maxImageBytes  = 4 << 20
)

// Manager runs a set of servers for one agent: it starts them, keeps
// their tool lists current, restarts one that dies (once), and stops them
// all on Close. Safe for concurrent use.
type Manager struct {
	mu       sync.Mutex
	onChange func()
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	servers  []*server
}

// Start starts every server of specs in the background and returns at
// once; onChange, if set, is called (from any goroutine) each time a
// server's state or tool list changes. Ready waits for the first starts.
// ctx bounds the servers' lives, as Close does.
func Start(ctx context.Context, specs []Spec, onChange func()) *Manager {
	ctx, cancel := context.WithCancel(ctx)
	m := &Manager{onChange: onChange, ctx: ctx, cancel: cancel}
	for _, sp := range specs {
		s := &server{m: m, spec: sp, state: StateStarting, ready: make(chan struct{})}
		m.servers = append(m.servers, s)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.run(ctx)
		}()
	}
	return m
}

// Ready waits until every server has started or failed (or ctx ends).
func (m *Manager) Ready(ctx context.Context) {
	for _, s := range m.servers {
		select {
		case <-s.ready:
		case <-ctx.Done():
			return
		}
	}
}

// Status lists the servers in their config's order.
func (m *Manager) Status() []Status {
	out := make([]Status, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}

// Tools are the running servers' tools, for Agent.More: each named
// "mcp__SERVER__TOOL", cut to the providers' 64 characters of [A-Za-z0-9_-].
func (m *Manager) Tools() []agent.Tool {
	used := map[string]bool{}
	var out []agent.Tool
	for _, s := range m.servers {
		s.mu.Lock()
		if s.state == StateRunning || s.state == StateRestarting {
			for _, t := range s.tools {
				name := ToolName(s.spec.Name, t.Name, used)
				out = append(out, &tool{s: s, mcpName: t.Name, spec: toolSpec(name, s.spec.Name, t)})
			}
		}
		s.mu.Unlock()
	}
	return out
}

// Close stops every server and waits for them to end.
func (m *Manager) Close() {
	m.cancel()
	for _, s := range m.servers {
		s.mu.Lock()
		sess := s.session
		s.mu.Unlock()
		if sess != nil {
			sess.Close()
		}
	}
	m.wg.Wait()
}

// OnChange replaces the function called when a server's state or tools
// change.
func (m *Manager) OnChange(f func()) {
	m.mu.Lock()
	m.onChange = f
	m.mu.Unlock()
}

func (m *Manager) changed() {
	m.mu.Lock()
	f := m.onChange
	m.mu.Unlock()
	if f != nil {
		f()
	}
}

// server is one configured server and its current session.
type server struct {
	m     *Manager
	spec  Spec
	ready chan struct{} // closed once the first start ended, either way

	mu        sync.Mutex
	state     string
	err       string
	session   *sdk.ClientSession
	tools     []*sdk.Tool
	resources int
	prompts   int
	skipped   int // tools left out for their names (ValidToolName)
	restarts  int
	start     time.Duration
	// A listing after a list-changed notice runs, and another is due.
	refreshing, again bool
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.spec.Name, Where: s.spec.Where, Kind: s.spec.Kind(), Source: s.spec.Source, State: s.state,
		Error: s.err, Resources: s.resources, Prompts: s.prompts, Restarts: s.restarts, StartMS: s.start.Milliseconds(), Skipped: s.skipped}
	for _, t := range s.tools {
		st.Tools = append(st.Tools, t.Name)
	}
	return st
}

func (s *server) set(state, err string) {
	s.mu.Lock()
	s.state, s.err = state, err
	// A restarting server keeps its tools on offer: a call to one waits
	// for the restart (current) rather than finding no such tool.
	if state != StateRunning && state != StateRestarting {
		s.tools = nil
	}
	s.mu.Unlock()
	s.m.changed()
}

// run starts the server and watches it: a server that dies is started
// again, once; one that will not start is left failed.
func (s *server) run(ctx context.Context) {
	defer func() {
		select {
		case <-s.ready:
		default:
			close(s.ready)
		}
	}()
	for attempt := 0; ; attempt++ {
		t := s.spec.Connect()
		t0 := time.Now()
		sess, err := s.connect(ctx, t)
		if ctx.Err() != nil {
			if sess != nil {
				sess.Close()
			}
			s.set(StateStopped, "")
			return
		}
		if err != nil {
			s.set(StateFailed, withStderr(err, t).Error())
			return
		}
		s.mu.Lock()
		s.start = time.Since(t0)
		s.mu.Unlock()
		s.set(StateRunning, "")
		if attempt == 0 {
			close(s.ready)
		}
		werr := sess.Wait()
		s.mu.Lock()
		s.session = nil
		s.mu.Unlock()
		if ctx.Err() != nil {
			s.set(StateStopped, "")
			return
		}
		why := "the server stopped"
		if werr != nil && !errors.Is(werr, context.Canceled) {
			why += ": " + werr.Error()
		}
		died := withStderr(errors.New(why), t).Error()
		if attempt >= 1 {
			s.set(StateFailed, died+" (after its restart; not started again)")
			return
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		s.set(StateRestarting, died)
	}
}

// connect starts a session and reads the server's lists.
func (s *server) connect(ctx context.Context, t Transport) (*sdk.ClientSession, error) {
	var sessMu sync.Mutex
	var sess *sdk.ClientSession
	client := sdk.NewClient(&sdk.Implementation{Name: "cove", Version: "1"}, &sdk.ClientOptions{
		// No roots: a server given roots may put them in place of the
		// directories its command line names (server-filesystem does).
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			sessMu.Lock()
			cs := sess
			sessMu.Unlock()
			if cs != nil {
				s.refreshLater(ctx, cs)
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("could not start: %w", err)
	}
	sessMu.Lock()
	sess = cs
	sessMu.Unlock()
	s.mu.Lock()
	s.session = cs
	s.mu.Unlock()
	if err := s.refresh(cctx, cs); err != nil {
		cs.Close()
		return nil, fmt.Errorf("listing its tools: %w", err)
	}
	return cs, nil
}

// refresh reads the server's tools (and counts its resources and
// prompts), after a start or a list-changed notification.
func (s *server) refresh(ctx context.Context, cs *sdk.ClientSession) error {
	// Each list stops at its cap: a server's pages could go on forever.
	var tools []*sdk.Tool
	skipped := 0
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		if !ValidToolName(t.Name) {
			// A name with a separator or other odd characters is not
			// offered: it is part of the keys the user allows by.
			skipped++
			continue
		}
		if tools = append(tools, t); len(tools) >= maxTools {
			break
		}
	}
	caps := cs.InitializeResult().Capabilities
	resources, prompts := 0, 0
	if caps != nil && caps.Resources != nil {
		for _, err := range cs.Resources(ctx, nil) {
			if err != nil || resources >= maxListed {
				break
			}
			resources++
		}
	}
	if caps != nil && caps.Prompts != nil {
		for _, err := range cs.Prompts(ctx, nil) {
			if err != nil || prompts >= maxListed {
				break
			}
			prompts++
		}
	}
	s.mu.Lock()
	if s.session != cs {
		s.mu.Unlock()
		return nil // an older session's late answer
	}
	s.tools, s.resources, s.prompts, s.skipped = tools, resources, prompts, skipped
	s.mu.Unlock()
	s.m.changed()
	return nil
}

// refreshLater lists the tools again after a list-changed notification:
// not from the handler itself (it runs on the session's reading side,
// which the listing needs), and once at a time, however many notices a
// server sends while one listing runs.
func (s *server) refreshLater(ctx context.Context, cs *sdk.ClientSession) {
	s.mu.Lock()
	if s.refreshing {
		s.again = true
		s.mu.Unlock()
		return
	}
	s.refreshing = true
	s.mu.Unlock()
	go func() {
		for {
			s.refresh(ctx, cs)
			s.mu.Lock()
			if !s.again {
				s.refreshing = false
				s.mu.Unlock()
				return
			}
			s.again = false
			s.mu.Unlock()
		}
	}()
}

// current is the running session, or why there is none; while the
// server is being restarted, it waits for the restart (or ctx).
func (s *server) current(ctx context.Context) (*sdk.ClientSession, error) {
	for {
		s.mu.Lock()
		state, sess := s.state, s.session
		s.mu.Unlock()
		if state == StateRunning && sess != nil {
			return sess, nil
		}
		if state != StateRestarting && state != StateStarting {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := fmt.Sprintf("the MCP server %q is %s", s.spec.Name, s.state)
	if s.err != "" {
		msg += ": " + s.err
	}
	return nil, errors.New(msg)
}

// withStderr adds the end of what the server said on stderr to err.
func withStderr(err error, t Transport) error {
	if t.Stderr == nil {
		return err
	}
	tail := strings.TrimSpace(t.Stderr())
	if tail == "" {
		return err
	}
	lines := strings.Split(tail, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return fmt.Errorf("%w; its stderr ended: %s", err, strings.Join(lines, " | "))
}
