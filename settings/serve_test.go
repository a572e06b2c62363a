package settings

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	srv := httptest.NewServer(EditorHandler(path, 20*time.Millisecond, 2*time.Second))
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
		os.WriteFile(path, []byte(`{"editor": {"fontSize": 23}}`), 0o600)
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
		os.WriteFile(path, []byte(`{"editor": {"fontSize": 99}}`), 0o600)
	}()
	bad, _ := get(same.Version)
	if bad.Error == "" || bad.Editor.FontSize != 0 {
		t.Errorf("a bad file: %+v", bad)
	}
}
