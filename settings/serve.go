package settings

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
)

// EditorHandler serves GET /api/settings for the IDE: the editor's
// settings from the file at path, read anew, with a version (a hash of
// the answer). ?wait=VERSION holds the request while the settings are
// still VERSION, looking again each poll, for up to hold: an open window
// asks again as soon as it has its answer, and a change to the file
// reaches it within poll, with no request from an idle window in
// between (it used to ask every 2 s). A file cove cannot take is said,
// and the defaults hold. Once stop is done (the launcher's server shutting
// down, which waits for the requests it serves), held requests are
// answered at once.
func EditorHandler(stop context.Context, path string, poll, hold time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, version := editorAnswer(path)
		if wait := r.URL.Query().Get("wait"); wait != "" {
			ctx, cancel := context.WithTimeout(r.Context(), hold)
			defer cancel()
			go func() {
				select {
				case <-stop.Done():
					cancel()
				case <-ctx.Done():
				}
			}()
			t := time.NewTicker(poll)
			defer t.Stop()
			for version == wait {
				select {
				case <-ctx.Done():
					if r.Context().Err() != nil {
						return // the window went
					}
				case <-t.C:
					body, version = editorAnswer(path)
					continue
				}
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	})
}

// editorAnswer is the answer for the settings file at path now, and its
// version.
func editorAnswer(path string) ([]byte, string) {
	s, err := Load(path)
	res := map[string]any{"editor": s.Editor, "path": s.Path}
	if err != nil {
		res = map[string]any{"editor": Editor{}, "path": s.Path, "error": err.Error()}
	}
	b, _ := json.Marshal(res)
	sum := sha256.Sum256(b)
	res["version"] = hex.EncodeToString(sum[:8])
	b, _ = json.Marshal(res)
	return append(b, '\n'), res["version"].(string)
}
