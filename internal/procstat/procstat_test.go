package procstat

import (
	"os"
	"strconv"
	"testing"
)

func TestFieldsOfThisProcess(t *testing.T) {
	f, err := Fields(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(f) < 20 || f[0] != "R" && f[0] != "S" || f[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("fields %q (parent %d)", f, os.Getppid())
	}
	if _, err := Fields(-1); err == nil {
		t.Error("no error for a process that is not there")
	}
}
