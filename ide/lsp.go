package ide

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/internal/tailbuf"
	"github.com/tailscale/hujson"
)

// Language servers run here, in the workspace, never on the host: the
// page asks for one by name (GET /api/lsp/{name}, a WebSocket of LSP's
// JSON messages, one per message), and this server starts it with the
// project as its directory and relays between the page and its stdin and
// stdout. A server is one process per name (a second window takes it
// over: LSP has one client), started when a page connects and stopped
// when it goes; one that exits closes the WebSocket, and the page
// connects again, which starts it anew.

// maxLSPMessage bounds one LSP message either way (8 MiB, a file's
// worth): a server that sends more is ended, not buffered without end.
const maxLSPMessage = 8 << 20

// Close codes of the LSP WebSocket, in the application's range.
const (
	closeNoServer    = 4404 // no such language server in this workspace
	closeTaken       = 4409 // another window took the server over
	closeTooLarge    = 4413 // the server sent a message over maxLSPMessage
	closeServerEnded = 4500 // the server exited (the page starts it again)
)

// languageServer is one the page can ask for: its name (the route's),
// the LSP language IDs it serves and the command that runs it on stdio.
type languageServer struct {
	Name      string   `json:"name"`
	Languages []string `json:"languages"`
	Command   []string `json:"command"`
}

// knownServers are looked for in the image's PATH.
var knownServers = []languageServer{
	{Name: "go", Languages: []string{"go"}, Command: []string{"gopls"}},
	{Name: "typescript", Languages: []string{"typescript", "javascript", "typescriptreact", "javascriptreact"}, Command: []string{"typescript-language-server", "--stdio"}},
	{Name: "c", Languages: []string{"c", "cpp"}, Command: []string{"clangd"}},
	{Name: "python", Languages: []string{"python"}, Command: []string{"pyright-langserver", "--stdio"}},
	{Name: "rust", Languages: []string{"rust"}, Command: []string{"rust-analyzer"}},
}

// languages serves the language servers of the project in dir.
type languages struct {
	dir *projectfs.Dir
	// keepalive is how often a server's WebSocket is pinged (keepalive.go).
	keepalive time.Duration
	// silence is how long a server may leave a request unanswered, saying
	// nothing and using no CPU, before it is taken as hung (lspwatch.go);
	// zero is lspSilence.
	silence time.Duration
	mu      sync.Mutex
	running map[string]*lspProcess // by name: the one each name has
}

// servers are the language servers this workspace has: those the
// project names in devcontainer.json (customizations.cove.languageServers,
// {"NAME": {"command": [...], "languages": [...]}}), which replace a
// known one of the same name, then the known ones the image has.
func (l *languages) servers() []languageServer {
	var out []languageServer
	named := map[string]bool{}
	for _, s := range l.configured() {
		if len(s.Command) == 0 || len(s.Languages) == 0 || s.Name == "" || strings.ContainsAny(s.Name, "/?#") {
			continue
		}
		named[s.Name] = true
		out = append(out, s)
	}
	for _, s := range knownServers {
		if named[s.Name] {
			continue
		}
		if _, err := exec.LookPath(s.Command[0]); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// configured reads customizations.cove.languageServers from the
// project's devcontainer.json; none when it says nothing of them.
func (l *languages) configured() []languageServer {
	var out []languageServer
	for name, s := range l.projectConfig().LanguageServers {
		s.Name = name
		out = append(out, s)
	}
	return out
}

// coveCustomizations are what devcontainer.json's customizations.cove
// say of the editor: the language servers, and whether to format a file
// as it is saved (the user's own setting, if any, wins in the page).
type coveCustomizations struct {
	LanguageServers map[string]languageServer `json:"languageServers"`
	FormatOnSave    *bool                     `json:"formatOnSave"`
}

// projectConfig reads customizations.cove from the project's
// devcontainer.json (comments and trailing commas allowed); nothing when
// there is no such file or it cannot be read.
func (l *languages) projectConfig() coveCustomizations {
	var b []byte
	for _, p := range []string{".devcontainer/devcontainer.json", ".devcontainer.json"} {
		if fi, err := l.dir.Stat(p); err == nil && fi.Size() < 1<<20 {
			if b, err = l.dir.ReadFile(p); err == nil {
				break
			}
		}
	}
	std, err := hujson.Standardize(b)
	if len(b) == 0 || err != nil {
		return coveCustomizations{}
	}
	var cfg struct {
		Customizations struct {
			Cove coveCustomizations `json:"cove"`
		} `json:"customizations"`
	}
	if json.Unmarshal(std, &cfg) != nil {
		return coveCustomizations{}
	}
	return cfg.Customizations.Cove
}

// info serves GET /api/lsp: the project's root as the servers see it (a
// file URI), the servers there are, and whether the project asks for
// formatting on save (null: it does not say).
func (l *languages) info(w http.ResponseWriter, r *http.Request) {
	root := (&url.URL{Scheme: "file", Path: l.dir.Root}).String()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"root": root, "servers": l.servers(), "formatOnSave": l.projectConfig().FormatOnSave})
}

// serve serves GET /api/lsp/{name}: the WebSocket to that server.
func (l *languages) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var srv *languageServer
	for _, s := range l.servers() {
		if s.Name == name {
			srv = &s
			break
		}
	}
	announceKeepalive(w, l.keepalive)
	c, err := websocket.Accept(w, r, acceptOptions())
	if err != nil {
		return
	}
	defer c.CloseNow()
	if srv == nil {
		c.Close(closeNoServer, "no language server "+closeReason(name)+" in this workspace")
		return
	}
	c.SetReadLimit(maxLSPMessage)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	p, err := l.start(ctx, *srv)
	if err != nil {
		c.Close(closeServerEnded, closeReason(err.Error()))
		return
	}
	defer l.stop(name, p)
	go keepalive(ctx, c, l.keepalive)
	relayLSP(ctx, c, p, cmp.Or(l.silence, lspSilence))
}

// lspProcess is a running language server.
type lspProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *tailbuf.Buffer
	exited chan struct{}
	taken  chan struct{} // closed when another window takes the server over
	ended  sync.Once
}

// start runs s for one page, ending the one another window has.
func (l *languages) start(ctx context.Context, s languageServer) (*lspProcess, error) {
	l.mu.Lock()
	old := l.running[s.Name]
	delete(l.running, s.Name)
	l.mu.Unlock()
	if old != nil {
		close(old.taken)
		old.end()
	}
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = l.dir.Root
	cmd.Env = os.Environ()
	// Its own process group: ending it ends what it started (gopls's go
	// list, tsserver).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &lspProcess{cmd: cmd, stderr: tailbuf.New(2048), exited: make(chan struct{}), taken: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the language server %s (%s): %v", s.Name, s.Command[0], err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	l.mu.Lock()
	l.running[s.Name] = p
	l.mu.Unlock()
	return p, nil
}

// stop ends p, the server of name, unless another window has it now.
func (l *languages) stop(name string, p *lspProcess) {
	l.mu.Lock()
	if l.running[name] == p {
		delete(l.running, name)
	}
	l.mu.Unlock()
	p.end()
}

// end asks the server's process group to end, kills it if it has not
// within two seconds, and waits for it.
func (p *lspProcess) end() {
	// Once: after the process is reaped its group's id may be another's.
	p.ended.Do(p.endOnce)
}

func (p *lspProcess) endOnce() {
	p.stdin.Close()
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
}

// relayLSP passes messages between the page's WebSocket c and the server
// p until either ends, closes c with how it ended (a close code and
// reason), and says that.
func relayLSP(ctx context.Context, c *websocket.Conn, p *lspProcess, silence time.Duration) (websocket.StatusCode, string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan lspEnd, 3)
	watch := newLSPWatch(p.cmd.Process.Pid)
	go watch.run(ctx, silence, done)
	go func() {
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				done <- lspEnd{websocket.StatusNormalClosure, "the page went"}
				return
			}
			watch.sent(msg)
			if _, err := fmt.Fprintf(p.stdin, "Content-Length: %d\r\n\r\n%s", len(msg), msg); err != nil {
				return // the server went: its end is told below
			}
		}
	}()
	go func() {
		code, why := websocket.StatusCode(closeServerEnded), ""
		err := readLSP(p.stdout, func(msg []byte) error {
			watch.heard(msg)
			if !utf8.Valid(msg) {
				msg = []byte(strings.ToValidUTF8(string(msg), "\uFFFD"))
			}
			return c.Write(ctx, websocket.MessageText, msg)
		})
		var big *tooLargeError
		switch {
		case errors.As(err, &big):
			code, why = closeTooLarge, err.Error()
		case ctx.Err() != nil:
			return
		default:
			<-p.exited
			why = "the language server exited"
			if s := p.cmd.ProcessState; s != nil {
				why += " (" + s.String() + ")"
			}
			if t := p.stderr.LastLine(); t != "" {
				why += ": " + t
			}
		}
		done <- lspEnd{code, why}
	}()
	var end lspEnd
	select {
	case end = <-done:
	case <-p.taken:
		end = lspEnd{closeTaken, "another window took the language server over"}
	}
	// Closed here, before the reads' context ends: a Read whose context
	// is cancelled drops the connection at once, and the close frame
	// with the code (the one that has the page start the server again)
	// would not reach the page; under load it did not.
	c.Close(end.code, closeReason(end.why))
	return end.code, end.why
}

// lspEnd is how a relay ended: the close code and reason the page gets.
type lspEnd struct {
	code websocket.StatusCode
	why  string
}

// tooLargeError is a message over maxLSPMessage.
type tooLargeError struct{ n int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the language server sent a message of %d bytes, over the limit of %d: it was stopped", e.n, maxLSPMessage)
}

// readLSP reads LSP's base protocol from r (headers, a blank line, then
// Content-Length bytes) and calls each with each message's body, until
// r ends, a header is malformed or too long, a message is over
// maxLSPMessage, or each fails.
func readLSP(r io.Reader, each func([]byte) error) error {
	br := bufio.NewReaderSize(r, 4096)
	for {
		n := int64(-1)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("read the language server's header: %w", err)
			}
			h := strings.TrimRight(string(line), "\r\n")
			if h == "" {
				break
			}
			k, v, ok := strings.Cut(h, ":")
			if ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
				if n, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || n < 0 {
					return fmt.Errorf("the language server sent a bad Content-Length: %q", closeReason(v))
				}
			}
		}
		if n < 0 {
			return errors.New("the language server sent a message without Content-Length")
		}
		if n > maxLSPMessage {
			return &tooLargeError{n}
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(br, msg); err != nil {
			return fmt.Errorf("read the language server's message: %w", err)
		}
		if err := each(msg); err != nil {
			return err
		}
	}
}

// closeReason makes s fit a WebSocket close frame's reason (123 bytes)
// as printable text.
func closeReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
	for len(s) > 123 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
