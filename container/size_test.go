package container

import "testing"

// TestParseSize: the sizes docker run takes, as projects write them.
func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"": 0, "512": 512, "64k": 64 << 10, "64m": 64 << 20, "2g": 2 << 30, "2gb": 2 << 30, "1GiB": 1 << 30,
		"1.5g": 3 << 29, "100MB": 100 << 20, "1t": 1 << 40} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"lots", "-1m", "0", "1e3m", "0x10", "m", "1p", "nan", "inf"} {
		if got, err := ParseSize(s); err == nil {
			t.Errorf("%q: %d, want an error", s, got)
		}
	}
}
