package settings

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestEditorHandlerWaitsForAChange: a window asking with the version it
// has is answered when the file changes, not before; with another
// version at once; and unchanged once the hold is over.
func TestEditorHandlerWaitsForAChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"editor": {"fontSize": 19}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(EditorHandler(context.Background(), path, 20*time.Millisecond, 2*time.Second))
	defer srv.Close()
	type answer struct {
		Editor  Editor `json:"editor"`
		Version string `json:"version"`
		Error   string `json:"error"`
	}
	get := func(wait string) (answer, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := http.Get(srv.URL + "/api/settings?wait=" + wait)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatal(err)
		}
		return a, time.Since(start)
	}
	first, took := get("-")
	if first.Editor.FontSize != 19 || first.Version == "" || took > time.Second {
		t.Fatalf("first answer %+v after %v", first, took)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		replace(t, path, `{"editor": {"fontSize": 23}}`)
	}()
	changed, took := get(first.Version)
	if changed.Editor.FontSize != 23 || changed.Version == first.Version {
		t.Fatalf("after the change: %+v", changed)
	}
	if took < 250*time.Millisecond {
		t.Errorf("answered after %v, before the file changed (300 ms)", took)
	}
	same, took := get(changed.Version)
	if same.Version != changed.Version || took < 2*time.Second {
		t.Errorf("unchanged: %+v after %v, want the same version after the 2 s hold", same, took)
	}
	// A file cove cannot take is a change too, and is said.
	go func() {
		time.Sleep(100 * time.Millisecond)
		replace(t, path, `{"editor": {"fontSize": 99}}`)
	}()
	bad, _ := get(same.Version)
	if bad.Error == "" || bad.Editor.FontSize != 0 {
		t.Errorf("a bad file: %+v", bad)
	}
}

// TestEditorHandlerWaitsOutAHalfWrittenFile: a read that fails is
// answered to a held request only when the next read, a poll later,
// fails alike: a file saved in place is empty or half-written for a
// moment, and the window would have reset its editors and said so.
func TestEditorHandlerWaitsOutAHalfWrittenFile(t *testing.T) {
	answer := func(editor, failure string) ([]byte, string) {
		b, _ := json.Marshal(map[string]any{"editor": json.RawMessage(editor), "error": failure, "version": editor + failure})
		return b, editor + failure
	}
	for _, c := range []struct {
		name  string
		reads [][2]string // editor, error: the first is the window's version
		want  string      // the answer's editor and error
	}{
		{"saved in place", [][2]string{{`{"fontSize":19}`, ""}, {`{}`, "unexpected end of JSON input"}, {`{"fontSize":21}`, ""}}, `{"fontSize":21}`},
		{"saved in place while held", [][2]string{{`{"fontSize":19}`, ""}, {`{"fontSize":19}`, ""}, {`{}`, "unexpected end of JSON input"}, {`{"fontSize":21}`, ""}}, `{"fontSize":21}`},
		{"broken for good", [][2]string{{`{"fontSize":19}`, ""}, {`{}`, "invalid character"}, {`{}`, "invalid character"}, {`{"fontSize":21}`, ""}}, `{}invalid character`},
		{"broken, then otherwise", [][2]string{{`{"fontSize":19}`, ""}, {`{}`, "unexpected end"}, {`{}`, "invalid character"}, {`{}`, "invalid character"}}, `{}invalid character`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			read := func() ([]byte, string) {
				mu.Lock()
				defer mu.Unlock()
				r := c.reads[min(n, len(c.reads)-1)]
				n++
				return answer(r[0], r[1])
			}
			_, first := read()
			srv := httptest.NewServer(editorHandler(context.Background(), read, 10*time.Millisecond, 5*time.Second))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/api/settings?wait=" + url.QueryEscape(first))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct{ Version string }
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got.Version != c.want {
				t.Errorf("answered %q, want %q", got.Version, c.want)
			}
		})
	}
}

// replace writes path anew by a rename, as editors save: written in
// place, a poll could read it empty, half-way.
func replace(t *testing.T, path, content string) {
	if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
		t.Error(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Error(err)
	}
}

// TestEditorHandlerEndsWithItsServer: a held request is answered at
// once when the launcher's server shuts down, which waits for the
// requests it serves (up to 2 s, on each cove up's stop).
func TestEditorHandlerEndsWithItsServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	stop, stopped := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(EditorHandler(stop, path, 20*time.Millisecond, time.Minute))
	srv.Config.RegisterOnShutdown(stopped)
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/settings")
	if err != nil {
		t.Fatal(err)
	}
	var first struct{ Version string }
	json.NewDecoder(resp.Body).Decode(&first)
	resp.Body.Close()
	held := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/api/settings?wait=" + first.Version)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the server took %v to shut down with a held request", took)
	}
	if err := <-held; err != nil {
		t.Errorf("the held request: %v", err)
	}
}
