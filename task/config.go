package task

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Bounds of the .devcontainer a project's workspace hands over.
const (
	maxConfigFiles = 1000
	maxConfigFile  = 4 << 20
)

// extractConfig writes into tree (new, and cove's alone until a workspace
// has it) the project's .devcontainer and .devcontainer.json from data,
// a tar the project's workspace made (git archive): only plain files and
// directories, at clean names under those two, each file at most
// maxConfigFile; anything else in it is refused, not skipped: the
// workspace made it.
func extractConfig(tree string, data []byte) error {
	tr := tar.NewReader(bytes.NewReader(data))
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the workspace's archive: %w", err)
		}
		if n >= maxConfigFiles {
			return fmt.Errorf("more than %d entries", maxConfigFiles)
		}
		if h.Typeflag == tar.TypeXGlobalHeader { // git archive's commit id
			continue
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || path.Clean(name) != name || !filepath.IsLocal(name) ||
			(name != ".devcontainer.json" && name != ".devcontainer" && !strings.HasPrefix(name, ".devcontainer/")) {
			return fmt.Errorf("refused entry %q", name)
		}
		p := filepath.Join(tree, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if h.Size > maxConfigFile {
				return fmt.Errorf("%s is over %d MiB", name, maxConfigFile>>20)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(h.Mode).Perm()&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, maxConfigFile))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			// A symlink in .devcontainer is checked out by git in the
			// task's tree (Populate); only its workspace follows it.
			continue
		}
	}
}
