package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
)

// maxDownload bounds what ADD reads from one URL.
const maxDownload = 16 << 30

// isURL says whether an ADD source is a URL to fetch.
func isURL(p string) bool {
	return strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://")
}

// isGitSource says whether an ADD source names a git repository, as
// BuildKit reads them.
func isGitSource(p string) bool {
	if strings.HasPrefix(p, "git@") || strings.HasPrefix(p, "git://") || strings.HasPrefix(p, "ssh://") {
		return true
	}
	if !isURL(p) {
		return strings.Contains(p, "://")
	}
	u, err := url.Parse(p)
	return err == nil && (strings.HasSuffix(u.Path, ".git") || u.Fragment != "" && strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), ".git"))
}

// addURL fetches u (on the host, with ctx) into the layer being staged:
// at dest, or in it under the URL's file name when dest is a directory.
// The file's mode is 0600 unless --chmod says otherwise, and its time the
// server's Last-Modified, as in BuildKit. With checksum (sha256:HEX) the
// content must match it. With --unpack=true an archive is unpacked into
// dest. The content goes into the cache key, so an unchanged download
// still hits.
func (b *builder) addURL(ctx context.Context, u, checksum string, unpack *bool, spec copySpec, several bool, layer string, h hash.Hash) error {
	parsed, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	d, err := b.download(ctx, u)
	if err != nil {
		return err
	}
	defer d.close()
	if checksum != "" {
		algo, _, ok := strings.Cut(checksum, ":")
		if !ok || algo != "sha256" {
			return fmt.Errorf("--checksum=%s: give sha256:HEX", checksum)
		}
		if !strings.EqualFold(checksum, d.digest) {
			return fmt.Errorf("fetch %s: checksum mismatch: the content is %s, --checksum says %s", u, d.digest, checksum)
		}
	}
	if _, err := d.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dst, err := os.OpenRoot(layer)
	if err != nil {
		return err
	}
	defer dst.Close()
	if unpack != nil && *unpack && image.IsArchive(d.file) {
		return d.unpack(ctx, u, spec, dst, layer, h)
	}
	if _, err := d.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	target := spec.dest
	if spec.destDir || several {
		name := path.Base(parsed.Path)
		if name == "/" || name == "." || name == "" {
			return fmt.Errorf("%s: the URL names no file: give ADD a destination file name, not a directory", u)
		}
		target = path.Join(spec.dest, name)
	}
	return d.write(u, target, spec, dst, h)
}

// download is a URL's content, fetched to a file in the build's scratch
// space and hashed on the way.
type download struct {
	file         *os.File
	digest       string // sha256:HEX
	lastModified string // the server's Last-Modified header
	body         io.Closer
}

// download fetches u, through a client that reaches only what a confined
// build's RUN could, and no more than maxDownload of it.
func (b *builder) download(ctx context.Context, u string) (*download, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	client := http.DefaultClient
	if b.opts.Confined {
		if client, err = confinedClient(); err != nil {
			return nil, err
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", u, err)
	}
	d := &download{body: resp.Body, lastModified: resp.Header.Get("Last-Modified")}
	if resp.StatusCode != http.StatusOK {
		d.close()
		return nil, fmt.Errorf("fetch %s: the server answered %s", u, resp.Status)
	}
	if d.file, err = os.CreateTemp(b.tmp, "url-"); err != nil {
		d.close()
		return nil, err
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(d.file, sum), io.LimitReader(resp.Body, maxDownload+1))
	if err != nil {
		d.close()
		return nil, fmt.Errorf("fetch %s: %w", u, err)
	}
	if n > maxDownload {
		d.close()
		return nil, fmt.Errorf("fetch %s: more than %d GiB: download it in a RUN instead", u, maxDownload>>30)
	}
	d.digest = "sha256:" + hex.EncodeToString(sum.Sum(nil))
	return d, nil
}

// close removes the scratch file and closes the response.
func (d *download) close() {
	if d.file != nil {
		d.file.Close()
		os.Remove(d.file.Name())
	}
	d.body.Close()
}

// unpack unpacks the downloaded archive into dest (ADD --unpack=true).
func (d *download) unpack(ctx context.Context, u string, spec copySpec, dst *os.Root, layer string, h hash.Hash) error {
	if _, err := d.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	target := inRoot(spec.dest)
	if err := dst.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("%s: %w", spec.dest, err)
	}
	fmt.Fprintf(h, "add-url-unpack\x00%s\x00%s\x00%s\x00", u, spec.dest, d.digest)
	if _, err := image.UnpackOwned(ctx, d.file, filepath.Join(layer, target), 0); err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}

// write writes the download as the file target, with --chown's owner,
// --chmod's mode (0600 by default) and the server's time.
func (d *download) write(u, target string, spec copySpec, dst *os.Root, h hash.Hash) error {
	perm := spec.mode
	if perm == 0 {
		perm = 0o600
	}
	fmt.Fprintf(h, "add-url\x00%s\x00%s\x00%s\x00%o\x00%d:%d\x00", u, target, d.digest, perm, spec.uid, spec.gid)
	out := inRoot(target)
	if err := dst.MkdirAll(path.Dir(out), 0o755); err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if err := removeNonDir(dst, out); err != nil {
		return err
	}
	f, err := dst.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	_, err = io.Copy(f, d.file)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if err := lchown(dst, out, spec); err != nil {
		return err
	}
	if err := dst.Chmod(out, perm); err != nil {
		return err
	}
	mtime := time.Now()
	if lm, err := http.ParseTime(d.lastModified); err == nil {
		mtime = lm
	}
	return dst.Chtimes(out, mtime, mtime)
}

// resolveDest follows the symlinks in a COPY's destination as the stage's
// own processes would (inside the stage: an absolute link from its root,
// .. never above it), as BuildKit does; a destination that is a directory
// there is copied into.
func (b *builder) resolveDest(st *stage, spec *copySpec) error {
	lowers := st.lowers()
	if len(lowers) == 0 {
		return nil
	}
	full, err := resolveInStage(lowers, inRoot(spec.dest))
	if err != nil {
		return fmt.Errorf("%s: %w", spec.dest, err)
	}
	if _, fi := b.lookup(st, full); fi != nil && fi.IsDir() {
		spec.dest, spec.destDir = path.Join("/", full), true
		return nil
	}
	if spec.dest == "/" {
		return nil
	}
	parent, err := resolveInStage(lowers, inRoot(path.Dir(spec.dest)))
	if err != nil {
		return fmt.Errorf("%s: %w", spec.dest, err)
	}
	spec.dest = path.Join("/", parent, path.Base(spec.dest))
	return nil
}

// confinedClient fetches only from addresses a container with its own
// network (container.NetPrivate) reaches: not the host's loopback, its
// own addresses, link-local ones or the cloud metadata services; through
// redirects too (every connection is checked as it is dialled), with no
// proxy.
func confinedClient() (*http.Client, error) {
	host, err := container.HostAddresses()
	if err != nil {
		return nil, err
	}
	var blocked []netip.Prefix
	for _, a := range host {
		if p, err := netip.ParsePrefix(a); err == nil {
			blocked = append(blocked, p)
		}
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		ip := ap.Addr().Unmap()
		if ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() {
			return fmt.Errorf("%s is this machine's or local: a confined build fetches only from elsewhere", ip)
		}
		for _, p := range blocked {
			if p.Contains(ip) {
				return fmt.Errorf("%s is this machine's own address: a confined build fetches only from elsewhere", ip)
			}
		}
		return nil
	}}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: 30 * time.Second,
		ForceAttemptHTTP2: true}}, nil
}
