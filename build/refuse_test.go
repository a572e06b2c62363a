package build

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestRefusedNotIgnored: what of the Dockerfile reference cove build does
// not do fails the build with an error naming it and what to do, never
// ignored; what it does (or, as the directive for this frontend, needs
// nothing for) builds.
func TestRefusedNotIgnored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dockerfile, want string }{
		{"FROM scratch\nRUN --security=insecure true\n", "RUN --security=insecure is not supported"},
		{"FROM scratch\nRUN --device=/dev/fuse true\n", "RUN --device is not supported"},
		{"FROM scratch\nRUN --mount=type=tmpfs,target=/t,size=10m true\n", "size= is not supported"},
		{"FROM scratch\nRUN --mount=type=ssh true\n", "type=ssh is not supported"},
		{"FROM scratch\nHEALTHCHECK --start-interval=1s CMD true\n", "--start-interval is not supported"},
		{"FROM scratch\nSTOPSIGNAL SIGNOPE\n", "not a signal"},
		{"FROM scratch\nEXPOSE 80/quic\n", "not tcp, udp or sctp"},
		{"FROM scratch\nADD https://github.com/moby/buildkit.git /src\n", "ADD of a git repository is not supported"},
		{"# syntax=example.com/my/frontend:1\nFROM scratch\n", "runs no other frontend image"},
		{"# check=error=true\nFROM scratch as base\n", "FromAsCasing"},
		{"# check=nonsense\nFROM scratch\n", "# check=nonsense"},
	} {
		_, err := testBuild{dockerfile: tc.dockerfile}.run(t)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.dockerfile, err, tc.want)
		}
	}
	for _, df := range []string{
		"# syntax=docker/dockerfile:1\nFROM scratch\n",
		"# syntax=docker.io/docker/dockerfile:1.7-labs\nFROM scratch\n",
		"# escape=`\nFROM scratch\nENV A=1 `\n  B=2\n",
		"# check=skip=all;error=true\nFROM scratch as base\n",
		"# check=error=true\nFROM scratch AS base\nSTOPSIGNAL 15\nSTOPSIGNAL sigrtmin+3\n",
	} {
		if _, err := (testBuild{dockerfile: df}).run(t); err != nil {
			t.Errorf("%q: %v", df, err)
		}
	}
	for arg, want := range map[string]string{
		"BUILDKIT_SYNTAX=x/y":                   "runs no other frontend image",
		"BUILDKIT_INLINE_CACHE=1":               "writes no cache metadata",
		"BUILDKIT_MULTI_PLATFORM=true":          "one platform's image",
		"BUILDKIT_DOCKERFILE_CHECK=error=true":  "FromAsCasing",
		"BUILDKIT_DOCKERFILE_CHECK=skip=bogus;": "BUILDKIT_DOCKERFILE_CHECK",
	} {
		k, v, _ := strings.Cut(arg, "=")
		_, err := testBuild{dockerfile: "FROM scratch as base\n", opts: Options{BuildArgs: map[string]string{k: v}}}.run(t)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--build-arg %s: %v, want an error with %q", arg, err, want)
		}
	}
}

// TestAddCompressedArchives: ADD unpacks a bzip2-compressed tar as the
// reference says (gzip and zstd: add_test.go); an xz one, which cove
// cannot unpack, is refused by name rather than copied packed, and an xz
// file that is no tar archive by its name is copied as it is.
func TestAddCompressedArchives(t *testing.T) {
	t.Parallel()
	// tar of d/f ("bz\n"), bzip2 -9.
	bz, err := base64.StdEncoding.DecodeString("QlpoOTFBWSZTWT4qyCEAAI57hMmQAEJAAO+AAAN1AJ4QAACACCAAdQlER6QAND1AAVKkPTUaaHqAGh6mi/rfnaikgyrEkccbVyM7YKKlmCQ1B7BInZA6I2MIibuyBeLQE2d68oyVZKEz7hfFj6fFWi7YXfl8Uh/F3JFOFCQPirIIQA==")
	if err != nil {
		t.Fatal(err)
	}
	xz := "\xfd7zXZ\x00rest"
	b := testBuild{dockerfile: "FROM scratch\nADD a.tar.bz2 /bz/\nADD data.xz /data.xz\n",
		files: map[string]string{"a.tar.bz2": string(bz), "data.xz": xz}}.mustRun(t)
	if b.file(t, "bz/d/f") != "bz\n" || b.file(t, "data.xz") != xz {
		t.Errorf("/bz/d/f %q, /data.xz %q", b.file(t, "bz/d/f"), b.file(t, "data.xz"))
	}
	_, err = testBuild{dockerfile: "FROM scratch\nADD a.tar.xz /x/\n", files: map[string]string{"a.tar.xz": xz}}.run(t)
	if err == nil || !strings.Contains(err.Error(), "xz-compressed archive is not supported") {
		t.Errorf("ADD of a .tar.xz: %v", err)
	}
}
