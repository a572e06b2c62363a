package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// serveEnv makes this test binary a background launcher (TestMain): it
// publishes a record at the path it names, and serves until killed.
const serveEnv = "COVE_LAUNCHER_TEST_SERVE"

func TestMain(m *testing.M) {
	if path := os.Getenv(serveEnv); path != "" {
		if _, err := (Record{URL: "http://127.0.0.1:9/?token=bg"}).Publish(path, os.Getpid()); err != nil {
			os.Exit(2)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBackgroundStartsInItsOwnSession: cove up --detach's server runs in
// a session of its own (a terminal's hangup does not reach it) and Start
// returns once its record names it.
func TestBackgroundStartsInItsOwnSession(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "run", "launcher.json")
	bg := Background{Binary: os.Args[0], RecordPath: rec, Env: append(os.Environ(), serveEnv+"="+rec), Poll: 5 * time.Millisecond}
	got, err := bg.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid := got.Launcher.Pid
	defer syscall.Kill(pid, syscall.SIGKILL)
	if got.URL != "http://127.0.0.1:9/?token=bg" {
		t.Errorf("the record: %+v", got)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("the server's session is %d (%v), want its own (%d)", sid, err, pid)
	}
}

// TestBackgroundThatFailsSaysWhy: a background server that ends without
// serving is reported with the end of its log, and where the log is.
func TestBackgroundThatFailsSaysWhy(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "launcher.json")
	bg := Background{Binary: "/bin/sh", Args: []string{"-c", "echo 'cove: no such image'; exit 3"}, RecordPath: rec, Poll: 5 * time.Millisecond}
	_, err := bg.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cove: no such image") || !strings.Contains(err.Error(), bg.LogPath()) {
		t.Fatalf("err = %v", err)
	}
	// A server that printed a terminal's escapes does not get them to ours.
	bg.Args = []string{"-c", `printf 'bad \033]0;title\007 end\n'; exit 1`}
	if _, err := bg.Start(context.Background()); err == nil || strings.ContainsRune(err.Error(), 0x1b) {
		t.Errorf("err = %q", err)
	}
}
