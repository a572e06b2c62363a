package shed

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestCleanFileMappings(t *testing.T) {
	smaps := `00400000-012c0000 r-xp 00000000 fe:00 10018854                           /usr/local/bin/cove
Size:              15104 kB
Rss:                8000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
012c0000-024e9000 r--p 00ec0000 fe:00 10018854                           /usr/local/bin/cove
Size:              18596 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
024e9000-025a1000 rw-p 020e9000 fe:00 10018854                           /usr/local/bin/cove
Anonymous:           512 kB
026a1000-026a2000 r--p 020e9000 fe:00 10018854                           /usr/local/bin/cove
Anonymous:             4 kB
025a1000-04814000 rw-p 00000000 00:00 0
Anonymous:          1024 kB
7ffd1000-7ffd3000 r--p 00000000 00:00 0                                  [vvar]
Anonymous:             0 kB
7ffd3000-7ffd5000 r-xp 00000000 00:00 0                                  [vdso]
Anonymous:             0 kB
7ffe0000-7ffe1000 --xp 00000000 fe:00 10018854                           /usr/local/bin/cove
Anonymous:             0 kB
7fff0000-7fff1000 r-xp 00000000 fe:00 10018855                           /lib/last
Anonymous:             0 kB
`
	got := cleanFileMappings([]byte(smaps))
	// The text and read-only data; not the data (writable), not a
	// read-only mapping with a private copy (a relocated section), not an
	// anonymous one or the vDSO, not one that cannot be read; the last
	// mapping counts although nothing follows it.
	want := []mapping{{0x400000, 0x12c0000}, {0x12c0000, 0x24e9000}, {0x7fff0000, 0x7fff1000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

// TestShedDropsAndKeepsRunning sheds this test process's own executable
// pages: its resident file pages fall, and it goes on running code and
// reading data from them.
func TestShedDropsAndKeepsRunning(t *testing.T) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	if len(cleanFileMappings(b)) == 0 {
		t.Fatal("no clean mapping of a file in this process's smaps")
	}
	before := rssFile(t)
	s := Open()
	s.Shed()
	after := rssFile(t)
	if after >= before {
		t.Errorf("resident file pages %d KB before shedding, %d KB after: nothing given back", before, after)
	}
	t.Logf("resident file pages: %d KB → %d KB", before, after)
	s.Shed() // again: the mappings found the first time
	if got := reflect.TypeOf(s).String(); got != "*shed.Shedder" {
		t.Fatalf("after shedding, the type's name reads %q", got)
	}
}

// rssFile is this process's RssFile in KB.
func rssFile(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
