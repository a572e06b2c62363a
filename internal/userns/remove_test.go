package userns

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestRetireFreesTheName: after Retire the directory's name is free at
// once (a new layer there starts empty) and its files are in the trash
// until Sweep deletes them, unreadable directories included.
func TestRetireFreesTheName(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "workspaces", "ws-1")
	os.MkdirAll(filepath.Join(dir, "upper", "locked"), 0o755)
	os.WriteFile(filepath.Join(dir, "upper", "locked", "f"), []byte("x"), 0o644)
	os.Chmod(filepath.Join(dir, "upper", "locked"), 0)
	trash := filepath.Join(base, "trash")
	tomb, err := Retire(dir, trash)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still exists after Retire: %v", dir, err)
	}
	if filepath.Dir(tomb) != trash {
		t.Fatalf("retired to %s, want a name in %s", tomb, trash)
	}
	if err := Sweep(context.Background(), trash); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(trash); len(left) != 0 {
		t.Fatalf("Sweep left %d entries", len(left))
	}
	if tomb, err := Retire(dir, trash); tomb != "" || err != nil {
		t.Fatalf("Retire of a missing directory: %q %v, want nothing", tomb, err)
	}
}
