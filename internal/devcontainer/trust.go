package devcontainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/tailscale/hujson"
)

// The user trusts a devcontainer.json on the host (cove up --trust): the
// record lives in the user's own config directory, keyed by the file's
// path and bound to its content and that of the project's files its
// initializeCommand names (a script beside it), so a change the workspace
// makes to any of them afterwards is untrusted again.

// TrustPath is the record of trusted devcontainer.json files.
func TrustPath(home string) string {
	return filepath.Join(dirs.ConfigDir(home), "trusted-devcontainer.json")
}

func readTrust(home string) map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(TrustPath(home)); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

func contentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Trusted says whether the user trusted the config at path, of the
// project in dir, with content raw (and the files its initializeCommand
// names as they are now).
func Trusted(home, dir, path string, raw []byte) bool {
	return raw != nil && readTrust(home)[path] == trustKey(dir, raw)
}

// trustKey is what a trust record binds: the file's bytes and, for each
// file of the project its initializeCommand names (sh
// .devcontainer/init.sh), that file's bytes. The command runs on the host,
// and the workspace can write the script as it can the file: trusting the
// file alone would let the workspace choose what runs. With no such file
// it is the file's sha256 alone, as records made before had it.
func trustKey(dir string, raw []byte) string {
	named := initializeFiles(dir, raw)
	if len(named) == 0 {
		return contentHash(raw)
	}
	h := sha256.New()
	h.Write(raw)
	d, err := projectfs.Open(dir)
	if err != nil {
		return "unreadable"
	}
	defer d.Close()
	for _, rel := range named {
		b, err := d.ReadFileLimit(rel, 1<<20)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, projectfs.ErrNotRegular):
			continue // not a file: a word of the command
		case err != nil:
			fmt.Fprintf(h, "\x00%s\x00unreadable: %v", rel, err)
		default:
			fmt.Fprintf(h, "\x00%s\x00%s", rel, contentHash(b))
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// initializeFiles are the words of raw's initializeCommand (any form) that
// could name a file in the project dir, relative to it (the command runs
// there), sorted.
func initializeFiles(dir string, raw []byte) []string {
	std, err := hujson.Standardize(raw)
	if err != nil {
		return nil
	}
	var f struct {
		InitializeCommand any `json:"initializeCommand"`
	}
	if json.Unmarshal(std, &f) != nil {
		return nil
	}
	var words []string
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case string:
			v = strings.ReplaceAll(v, "${localWorkspaceFolder}", dir)
			words = append(words, strings.FieldsFunc(v, func(r rune) bool {
				return strings.ContainsRune(" \t\n;&|<>()`'\"=", r)
			})...)
		case []any:
			for _, e := range v {
				collect(e)
			}
		case map[string]any:
			for _, e := range v {
				collect(e)
			}
		}
	}
	collect(f.InitializeCommand)
	var out []string
	for _, w := range words {
		if filepath.IsAbs(w) {
			r, err := filepath.Rel(dir, w)
			if err != nil {
				continue
			}
			w = r
		}
		w = filepath.Clean(w)
		if filepath.IsLocal(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// Trust records that the user trusts the project's devcontainer.json (the
// one opts chooses) as it is now, and returns its path and what trusting
// it lets take effect (what an untrusted read holds back: the command run
// on the host, the host paths, capabilities, run arguments, host
// variables), for the user to see: each exactly as it will be applied,
// read as the trusted file is (host paths with ${localEnv:HOME} and the
// like filled in from opts.Getenv), the host variables by name only (a
// value may be a secret). A project without one has nothing to trust.
func Trust(dir string, opts Options) (path string, grants []string, err error) {
	c, err := Load(dir, Options{ConfigPath: opts.ConfigPath})
	if err != nil {
		return "", nil, err
	}
	if c == nil {
		return "", nil, fmt.Errorf("%s has no devcontainer.json to trust", dir)
	}
	m := readTrust(opts.Home)
	m[c.Path] = trustKey(dir, c.Raw)
	if err := os.MkdirAll(filepath.Dir(TrustPath(opts.Home)), 0o700); err != nil {
		return "", nil, err
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := atomicfile.WriteFile(TrustPath(opts.Home), append(b, '\n')); err != nil {
		return "", nil, err
	}
	// Read again as the start will read it, trusted: what holdBack would
	// take from that is what the trust gives.
	t, err := Load(dir, opts)
	if err != nil {
		return "", nil, err
	}
	if t == nil || t.Path != c.Path || !t.Trusted {
		return "", nil, fmt.Errorf("%s changed while it was being trusted: read it again, then cove up --trust", c.Path)
	}
	held := *t
	held.Untrusted = nil
	held.holdBack(dir, &vars{})
	grants = held.Untrusted
	if len(c.vars.heldEnv) > 0 {
		grants = append(grants, "${localEnv:…}: this host's environment ("+strings.Join(c.vars.heldEnv, ", ")+")")
	}
	return c.Path, grants, nil
}
