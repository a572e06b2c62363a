package execfile

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriteThenRunWhileOthersFork: scripts written and run at once by
// many goroutines, each a fork elsewhere while the others write: none
// meets ETXTBSY.
func TestWriteThenRunWhileOthersFork(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				p := filepath.Join(dir, "s"+string(rune('a'+i))+string(rune('a'+j)))
				if err := Write(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
					t.Error(err)
					return
				}
				if err := exec.Command(p).Run(); err != nil {
					t.Errorf("%s: %v", p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
