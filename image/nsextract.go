package image

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/internal/userns"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// applier writes a rootfs: an extractor in this process, or one in the
// user namespace helper (rootless with subordinate ids), where files get
// the owners the image gives them, mapped through the user's ranges as a
// container's are: uid N of the image is the range's N on the host.
type applier interface {
	cloneInto(src string) error
	snapshot(dst string) error
	apply(ls *layerStream, diffID v1.Hash) error
	finish() error
	counts() Stats
	Close() error
}

func (e *extractor) counts() Stats { return e.stats }

// newApplier returns the applier for rootfs: in the helper where m.Helps,
// else here.
func newApplier(ctx context.Context, m userns.IDMap, rootfs string, maxSize int64) (applier, error) {
	if !m.Helps() {
		return newExtractor(rootfs, maxSize)
	}
	p, err := userns.Start(ctx, m, ExtractTask, rootfs, strconv.FormatInt(maxSize, 10))
	if err != nil {
		return nil, err
	}
	return &nsExtractor{p: p}, nil
}

// ExtractTask is the helper's task name for extraction: Extract.
const ExtractTask = "extract"

// The helper's protocol: the parent sends a request (a JSON line), for
// "layer" followed by the layer's uncompressed tar in frames (a 4-byte
// big-endian length, then that many bytes; length 0 ends the layer); the
// helper answers each with a reply line. Only the parent reads blobs and
// checks digests; the helper sees only the tar stream.
type extractRequest struct {
	Op  string `json:"op"`            // clone, snapshot, layer, finish
	Src string `json:"src,omitempty"` // clone: the tree to copy; snapshot: the new directory
}

type extractReply struct {
	Err   string `json:"err,omitempty"`
	Kind  string `json:"kind,omitempty"` // what Err wraps, for errors.Is on this side
	Stats Stats  `json:"stats"`
}

var errKinds = map[string]error{
	"unsafe": ErrUnsafeEntry, "too-large": ErrTooLarge,
	"ENOSPC": syscall.ENOSPC, "EDQUOT": syscall.EDQUOT, "EROFS": syscall.EROFS, "EACCES": syscall.EACCES,
}

// kindOrder is the order kinds are looked for: the unsafe entry first.
var kindOrder = []string{"unsafe", "too-large", "ENOSPC", "EDQUOT", "EROFS", "EACCES"}

// kindError is an error the helper reported, still wrapping its kind.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// nsExtractor is the applier of a helper process.
type nsExtractor struct {
	p      *userns.Proc
	stats  Stats
	err    error // the helper failed: every later call says so
	closed bool
}

func (x *nsExtractor) call(req extractRequest, body func(w io.Writer) error) error {
	if x.err != nil {
		return x.err
	}
	b, _ := json.Marshal(req)
	_, werr := x.p.In.Write(append(b, '\n'))
	if werr == nil && body != nil {
		werr = body(x.p.In)
	}
	if werr != nil && !errors.Is(werr, syscall.EPIPE) {
		// Not the helper's doing (the layer would not decompress): it
		// waits for the rest, so it goes.
		x.p.Kill()
		x.err = werr
		return werr
	}
	line, rerr := x.p.Out.ReadBytes('\n')
	var rep extractReply
	if rerr != nil || json.Unmarshal(line, &rep) != nil {
		// The helper is gone: what it printed says why.
		x.err = x.p.Wait()
		if x.err == nil {
			x.err = errors.New("the user namespace helper ended early")
		}
		return x.err
	}
	x.stats = rep.Stats
	if rep.Err != "" {
		x.err = &kindError{msg: rep.Err, kind: errKinds[rep.Kind]}
		return x.err
	}
	if werr != nil {
		x.err = werr
	}
	return werr
}

func (x *nsExtractor) cloneInto(src string) error {
	return x.call(extractRequest{Op: "clone", Src: src}, nil)
}

func (x *nsExtractor) snapshot(dst string) error {
	return x.call(extractRequest{Op: "snapshot", Src: dst}, nil)
}

func (x *nsExtractor) apply(ls *layerStream, diffID v1.Hash) error {
	return ls.applyWith(func(r io.Reader) error { return x.send(r) }, diffID)
}

// send has the helper apply the uncompressed tar stream r, to its end.
func (x *nsExtractor) send(r io.Reader) error {
	return x.call(extractRequest{Op: "layer"}, func(w io.Writer) error {
		// One buffer, its frame header first: each frame is one write.
		buf := make([]byte, 4+1<<20)
		for {
			n, err := r.Read(buf[4:])
			if n > 0 {
				binary.BigEndian.PutUint32(buf[:4], uint32(n))
				if _, werr := w.Write(buf[:4+n]); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("decompress: %w", err)
			}
		}
		binary.BigEndian.PutUint32(buf[:4], 0)
		_, err := w.Write(buf[:4])
		return err
	})
}

func (x *nsExtractor) finish() error { return x.call(extractRequest{Op: "finish"}, nil) }

func (x *nsExtractor) counts() Stats { return x.stats }

func (x *nsExtractor) Close() error {
	if x.closed {
		return x.err
	}
	x.closed = true
	if x.err != nil {
		x.p.Kill()
		return x.err
	}
	x.err = x.p.Wait()
	return x.err
}

// frameReader reads one layer's frames and ends at its 0-length frame.
type frameReader struct {
	r    *bufio.Reader
	left uint32
	done bool
}

func (f *frameReader) Read(p []byte) (int, error) {
	for f.left == 0 {
		if f.done {
			return 0, io.EOF
		}
		var hdr [4]byte
		if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		f.left = binary.BigEndian.Uint32(hdr[:])
		if f.left == 0 {
			f.done = true
		}
	}
	if uint32(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= uint32(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Extract is the helper's extraction task (ExtractTask): args are the
// rootfs and the size cap; requests come on in, replies go to out. It runs
// as root in the mapped user namespace, so the extractor keeps owners.
func Extract(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("extract: want ROOTFS MAXSIZE, got %q", args)
	}
	maxSize, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return err
	}
	ext, err := newExtractor(args[0], maxSize)
	if err != nil {
		return err
	}
	defer ext.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	enc := json.NewEncoder(out)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		var req extractRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return fmt.Errorf("extract: bad request: %w", err)
		}
		switch req.Op {
		case "clone":
			err = ext.cloneInto(req.Src)
		case "snapshot":
			err = ext.snapshot(req.Src)
		case "layer":
			fr := &frameReader{r: r}
			err = ext.applyLayer(fr)
			if err == nil {
				_, err = io.Copy(io.Discard, fr) // the tar's padding, for the parent's digest
			}
		case "finish":
			err = ext.finish()
		default:
			err = fmt.Errorf("extract: unknown request %q", req.Op)
		}
		rep := extractReply{Stats: ext.stats}
		if err != nil {
			rep.Err = err.Error()
			for _, k := range kindOrder {
				if errors.Is(err, errKinds[k]) {
					rep.Kind = k
					break
				}
			}
		}
		if eerr := enc.Encode(rep); eerr != nil {
			return eerr
		}
		if err != nil {
			// The parent may be writing the rest of a layer: ending makes
			// its write fail at once, and it reads this reply.
			os.Exit(1)
		}
	}
}

// OwnersMode is how the image's files got their owners (Owners), for an
// image stored before cove recorded it too: as root, the image's own; as
// a user, all the user's.
func (img *Image) OwnersMode() string {
	if img.Owners != "" {
		return img.Owners
	}
	if os.Geteuid() == 0 {
		return "root"
	}
	return "user"
}

// OwnersLost says whether the image's files do not have the owners the
// image gives them while this user could have them: stored with all of
// them the user's (without subordinate ids, or before cove kept owners),
// or through subordinate ranges other than the user's now. Removing and
// pulling it again gives them back.
func (img *Image) OwnersLost() bool {
	m := userns.Current()
	mode := img.OwnersMode()
	return m.Helps() && (mode == "user" || strings.HasPrefix(mode, "subids ") && mode != m.String())
}
