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
	Op   string `json:"op"` // write, create, remove; repo: git's own files
}

// repoFiles are the files of a repository's .git (its top and refs/heads)
// whose change is a change of what the Source Control view and the
// branch show: a commit, a checkout, a stage, a fetch, a merge, made
// anywhere (a terminal's git). Their changes go out as one "repo" change
// of ".git", so that the page looks again when it happens rather than
// every few seconds.
var repoFiles = map[string]bool{"HEAD": true, "index": true, "packed-refs": true, "ORIG_HEAD": true,
	"FETCH_HEAD": true, "MERGE_HEAD": true, "CHERRY_PICK_HEAD": true, "REVERT_HEAD": true, "COMMIT_EDITMSG": true}

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
	// The repository's own files, not its objects: a .git directory of
	// the project's (a worktree's .git file points elsewhere; the page
	// looks now and then for that).
	gitDir, heads := filepath.Join(root, ".git"), filepath.Join(root, ".git", "refs", "heads")
	if fi, err := os.Lstat(gitDir); err == nil && fi.IsDir() {
		wt.Add(gitDir)
		if fi, err := os.Lstat(heads); err == nil && fi.IsDir() {
			wt.Add(heads)
		}
	}
	// Editors save by rename and tools write in bursts: coalesce a little,
	// with a timer set by the first change (no ticker: an idle watch
	// wakes nothing).
	pending := map[string]string{}
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	armed := false
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
			if dir := filepath.Dir(ev.Name); dir == gitDir && repoFiles[filepath.Base(ev.Name)] || dir == heads && !strings.HasSuffix(ev.Name, ".lock") {
				pending[".git"] = "repo"
				if !armed {
					flush.Reset(100 * time.Millisecond)
					armed = true
				}
				continue
			}
			if ev.Name == gitDir && ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(gitDir); err == nil && fi.IsDir() {
					wt.Add(gitDir) // git init in a terminal
				}
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
			if !armed {
				flush.Reset(100 * time.Millisecond)
				armed = true
			}
		case <-wt.Errors:
		case <-flush.C:
			armed = false
			if err := send(); err != nil {
				return
			}
		}
	}
}
