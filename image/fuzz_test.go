package image

import (
	"archive/tar"
	"bytes"
	"testing"
)

// FuzzExtract feeds random tar streams to the extractor: whatever they
// hold, nothing outside the root may change and nothing may panic.
// Run it with a bounded -fuzzminimizetime (scripts/test.sh uses 50x): the
// default minimises every new input for up to a minute.
func FuzzExtract(f *testing.F) {
	seeds := [][]ent{
		{file("../victim", "x")},
		{symlink("etc", "../.."), file("etc/victim", "x")},
		{symlink("d", "/"), file("d/victim", "x")},
		{hardlink("h", "../victim")},
		{symlink("s", "../victim"), hardlink("h", "s")},
		{dir("a"), file("a/.wh..wh..opq", ""), file(".wh.a", "")},
		{symlink("a", "b"), symlink("b", "a"), file("a/x", "")},
		{file("x", "x"), dir("x"), file("x/y", "y"), ent{name: "p", typ: tar.TypeFifo, mode: 0o600}},
	}
	for _, s := range seeds {
		f.Add(tarLayer(f, s...))
	}
	f.Fuzz(func(t *testing.T, layer []byte) {
		sb := newSandbox(t)
		_ = sb.apply(t, 16<<20, layer)
		sb.checkCanaries(t)
		// The layer again, onto what the first pass left.
		_ = sb.apply(t, 16<<20, layer, bytes.Clone(layer))
		sb.checkCanaries(t)
	})
}
