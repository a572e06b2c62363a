package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogTailIsBounded: a background server that failed after printing
// without end is reported by its last lines, not by all of its log (which
// the workspace's output may have filled).
func TestLogTailIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "launcher.log")
	log := strings.Repeat("workspace output line\n", 50000) + "cove: the last word: failed\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	tail := LogTail(path, 8<<10)
	if len(tail) > 8<<10 || !strings.HasSuffix(tail, "cove: the last word: failed") || !strings.HasPrefix(tail, "workspace output line\n") {
		t.Errorf("tail of %d bytes: %q…%q", len(tail), tail[:min(len(tail), 40)], tail[max(len(tail)-40, 0):])
	}
	if short := LogTail(path+".none", 8<<10); short != "" {
		t.Errorf("no log: %q", short)
	}
}
