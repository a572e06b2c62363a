package ide

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/fsnotify/fsnotify"
)

// skipDirs are not watched: version control, dependencies, cove's state.
var skipDirs = map[string]bool{".git": true, "node_modules": true, ".cove": true}

// change is one event of GET /api/watch: a path (relative to the project)
// that was written, created or removed, by anyone (the agent, a terminal,
// another editor), so that open editors reload and the tree refreshes.
type change struct {
	Path string `json:"path"`
	Op   string `json:"op"` // write, create, remove
}

// watch serves GET /api/watch as a WebSocket of changes.
func (f files) watch(w http.ResponseWriter, r *http.Request) {
	announceKeepalive(w, f.keepalive)
	c, err := websocket.Accept(w, r, acceptOptions())
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context()) // the client only listens
	go keepalive(ctx, c, f.keepalive)
	wt, err := fsnotify.NewWatcher()
	if err != nil {
		c.Close(websocket.StatusInternalError, err.Error())
		return
	}
	defer wt.Close()
	root := f.dir.Root
	addTree := func(dir string) {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if p != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			wt.Add(p)
			return nil
		})
	}
	addTree(root)
	// Editors save by rename and tools write in bursts: coalesce a little.
	pending := map[string]string{}
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	send := func() error {
		for p, op := range pending {
			b, _ := json.Marshal(change{Path: p, Op: op})
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return err
			}
		}
		clear(pending)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wt.Events:
			if !ok {
				return
			}
			rel, err := filepath.Rel(root, ev.Name)
			if err != nil || strings.HasPrefix(rel, "..") || strings.Contains(rel, ".cove-") {
				continue // our own temporary files
			}
			if skipDirs[strings.SplitN(rel, string(filepath.Separator), 2)[0]] {
				continue
			}
			op := "write"
			switch {
			case ev.Has(fsnotify.Create):
				op = "create"
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					addTree(ev.Name)
				}
			case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
				op = "remove"
			case ev.Has(fsnotify.Chmod):
				continue
			}
			if pending[rel] != "create" {
				pending[rel] = op
			}
		case <-wt.Errors:
		case <-flush.C:
			if err := send(); err != nil {
				return
			}
		}
	}
}
