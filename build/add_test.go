package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAddURL: ADD of a URL, in-process against a real HTTP server: the
// file lands at dest or under its name in a directory, 0600 unless
// --chmod, with the server's Last-Modified and the --chown owner;
// --checksum is checked; --unpack unpacks an archive (and writes any
// other file as it is); what the step's key gets differs with what
// lands; and the refusals.
func TestAddURL(t *testing.T) {
	t.Parallel()
	const body = "downloaded\n"
	lastMod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	tw.WriteHeader(&tar.Header{Name: "pkg/bin", Mode: 0o755, Size: 3, Typeflag: tar.TypeReg})
	tw.Write([]byte("bin"))
	tw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/files/file.bin":
			w.Header().Set("Last-Modified", lastMod.Format(http.TimeFormat))
			io.WriteString(w, body)
		case "/a.tar":
			w.Write(archive.Bytes())
		case "/":
			io.WriteString(w, "index")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	sum := sha256.Sum256([]byte(body))
	good := "sha256:" + hex.EncodeToString(sum[:])
	b, err := newBuilder(nil, Options{Context: t.TempDir(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(b.tmp)
	yes, no := true, false
	owner := 0
	if os.Geteuid() == 0 {
		owner = 1000
	}
	type want struct {
		path, data string
		mode       os.FileMode
	}
	keys := map[string]bool{}
	for _, tc := range []struct {
		name, url, checksum string
		unpack              *bool
		spec                copySpec
		several             bool
		want                want
		err                 string
	}{
		{name: "into a directory", url: "/files/file.bin", spec: copySpec{dest: "/dl", destDir: true, uid: owner, gid: owner},
			want: want{"dl/file.bin", body, 0o600}},
		{name: "several sources", url: "/files/file.bin", spec: copySpec{dest: "/dl"}, several: true, want: want{"dl/file.bin", body, 0o600}},
		{name: "to a file, chmod", url: "/files/file.bin", spec: copySpec{dest: "/opt/f", mode: 0o644}, want: want{"opt/f", body, 0o644}},
		{name: "checksum", url: "/files/file.bin", checksum: good, spec: copySpec{dest: "/c"}, want: want{"c", body, 0o600}},
		{name: "unpack", url: "/a.tar", unpack: &yes, spec: copySpec{dest: "/u"}, want: want{"u/pkg/bin", "bin", 0o755}},
		{name: "unpack of no archive", url: "/files/file.bin", unpack: &yes, spec: copySpec{dest: "/n"}, want: want{"n", body, 0o600}},
		{name: "no unpack", url: "/a.tar", unpack: &no, spec: copySpec{dest: "/t.tar"}, want: want{"t.tar", archive.String(), 0o600}},
		{name: "checksum mismatch", url: "/files/file.bin", checksum: "sha256:" + strings.Repeat("0", 64), spec: copySpec{dest: "/x"},
			err: "checksum mismatch: the content is " + good},
		{name: "checksum algorithm", url: "/files/file.bin", checksum: "md5:00", spec: copySpec{dest: "/x"}, err: "--checksum=md5:00: give sha256:HEX"},
		{name: "not found", url: "/nothing", spec: copySpec{dest: "/x"}, err: "the server answered 404 Not Found"},
		{name: "no file name", url: "/", spec: copySpec{dest: "/d", destDir: true}, err: "the URL names no file"},
	} {
		layer := t.TempDir()
		h := sha256.New()
		err := b.addURL(context.Background(), srv.URL+tc.url, tc.checksum, tc.unpack, tc.spec, tc.several, layer, h)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		p := filepath.Join(layer, tc.want.path)
		data, err := os.ReadFile(p)
		fi, serr := os.Lstat(p)
		if err != nil || serr != nil || string(data) != tc.want.data || fi.Mode().Perm() != tc.want.mode {
			t.Errorf("%s: /%s: %q %v (%v %v), want %q %v", tc.name, tc.want.path, data, fi.Mode(), err, serr, tc.want.data, tc.want.mode)
			continue
		}
		if tc.url == "/files/file.bin" && !fi.ModTime().Equal(lastMod) {
			t.Errorf("%s: mtime %v, want the server's %v", tc.name, fi.ModTime(), lastMod)
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && tc.spec.uid != 0 && (st.Uid != uint32(owner) || st.Gid != uint32(owner)) {
			t.Errorf("%s: owner %d:%d, want %d", tc.name, st.Uid, st.Gid, owner)
		}
		key := hex.EncodeToString(h.Sum(nil))
		if keys[key] {
			t.Errorf("%s: the same key as another case: %s", tc.name, key)
		}
		keys[key] = true
	}
}
