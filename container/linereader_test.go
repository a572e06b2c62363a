package container

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLineReaderKeepsTheSecondLine: two replies that arrive in one read
// (a PID and, for a quick process, its exit) are two lines; the second
// used to be dropped, which lost exec exits.
func TestLineReaderKeepsTheSecondLine(t *testing.T) {
	a, b := socketPair(t)
	a.Write([]byte(`{"pid":7}` + "\n"))
	a.Write([]byte(`{"exit":0}` + "\n" + `{"exit":`))
	r := &lineReader{recv: fileRecvmsg(b)}
	for _, want := range []string{`{"pid":7}`, `{"exit":0}`} {
		line, _, err := r.next()
		if err != nil || string(line) != want {
			t.Fatalf("line %q, %v; want %q", line, err, want)
		}
	}
	a.Write([]byte("3}\n"))
	if line, _, err := r.next(); err != nil || string(line) != `{"exit":3}` {
		t.Fatalf("a line split across reads: %q, %v", line, err)
	}
	a.Close()
	if _, _, err := r.next(); err == nil {
		t.Fatal("no error at the end of the stream")
	}
}

// TestLineReaderGivesDescriptorsToTheirLine: a line without descriptors
// and one with (the keep-id keeper's pid, then init's interface) that
// arrive in one read: the descriptor is the second line's. It used to go
// with the first, which threw it away, and the second had none.
func TestLineReaderGivesDescriptorsToTheirLine(t *testing.T) {
	a, b := socketPair(t)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if err := unix.Sendmsg(int(a.Fd()), []byte(`{"pid":7}`+"\n"), nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Sendmsg(int(a.Fd()), []byte(`{"tap":true}`+"\n"), unix.UnixRights(int(null.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	r := &lineReader{recv: fileRecvmsg(b)}
	for _, want := range []struct {
		line string
		fds  int
	}{{`{"pid":7}`, 0}, {`{"tap":true}`, 1}} {
		line, got, err := r.next()
		for _, fd := range got {
			unix.Close(fd)
		}
		if err != nil || string(line) != want.line || len(got) != want.fds {
			t.Fatalf("line %q with %d descriptors, %v; want %q with %d", line, len(got), err, want.line, want.fds)
		}
	}
}

// socketPair is a connected pair of stream sockets, closed with the test.
func socketPair(t *testing.T) (a, b *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b = os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
