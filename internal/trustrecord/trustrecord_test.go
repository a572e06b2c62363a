package trustrecord

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestSetGet(t *testing.T) {
	t.Parallel()
	f := File{Path: filepath.Join(t.TempDir(), "cove", "trusted.json")}
	if f.Get("/p") != "" {
		t.Fatal("an empty record trusts something")
	}
	if err := f.Set("/p", Hash([]byte("a"))); err != nil {
		t.Fatal(err)
	}
	if err := f.Set("/q", "x"); err != nil {
		t.Fatal(err)
	}
	if f.Get("/p") != Hash([]byte("a")) || f.Get("/q") != "x" || f.Get("/p") == Hash([]byte("b")) {
		t.Errorf("record: /p %q /q %q", f.Get("/p"), f.Get("/q"))
	}
	fi, err := os.Stat(f.Path)
	if err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the record is %v (%v), want private", fi.Mode(), err)
	}
	if di, err := os.Stat(filepath.Dir(f.Path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("its directory is %v (%v), want 0700", di.Mode(), err)
	}
}

// TestSetKeepsConcurrentRecords: coves that trust projects at the same
// time (each its own read, change and write of the one record) all keep
// what they trusted.
func TestSetKeepsConcurrentRecords(t *testing.T) {
	t.Parallel()
	f := File{Path: filepath.Join(t.TempDir(), "cove", "trusted.json")}
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.Set(fmt.Sprintf("/project/%d", i), Hash([]byte{byte(i)}))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if got := f.Get(fmt.Sprintf("/project/%d", i)); got != Hash([]byte{byte(i)}) {
			t.Errorf("/project/%d: %q after %d coves trusted at once", i, got, n)
		}
	}
}
