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
// and the defaults hold; to a held request, only once two reads a poll
// apart found it so: an editor that saves in place (vim with
// backupcopy=yes) truncates the file and writes it, and a read in
// between would have reset every open editor's settings and said
// "unexpected end of JSON input" for a moment. Once stop is done (the
// launcher's server shutting down, which waits for the requests it
// serves), held requests are answered at once.
func EditorHandler(stop context.Context, path string, poll, hold time.Duration) http.Handler {
	return editorHandler(stop, func() ([]byte, string) { return editorAnswer(path) }, poll, hold)
}

// editorHandler is EditorHandler with the file's answer and version
// read by read.
func editorHandler(stop context.Context, read func() ([]byte, string), poll, hold time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, version := read()
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
			seen := "" // a failed read's version, answered when the next read fails alike
			for version == wait || failed(body) && version != seen {
				if version != wait {
					seen = version
				}
				select {
				case <-ctx.Done():
					if r.Context().Err() != nil {
						return // the window went
					}
					if failed(body) {
						body, _ = read() // the hold is over: as it is now
					}
				case <-t.C:
					body, version = read()
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

// failed says whether an answer of editorAnswer is of a file cove could
// not take.
func failed(answer []byte) bool {
	var a struct{ Error string }
	return json.Unmarshal(answer, &a) == nil && a.Error != ""
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
