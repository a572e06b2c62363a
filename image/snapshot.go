package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/userns"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// A stored image is its whole stack of layers flattened, so an image that
// shares only its first layers with it (a sibling: another image FROM the
// same base) could not start from it and would fetch and extract the shared
// layers again. So a pull also keeps the rootfs as it stood after some of
// its layers, a snapshot per chain of layers, made as a base copy is (new
// directories, every other file hardlinked), and a later image whose
// layers extend a snapshot's starts as a copy of it:
//
//	DIR/chains/NAME/rootfs         the tree after the chain's layers
//	DIR/chains/NAME/snapshot.json  what it holds (snapshot)
//
// NAME hashes the chain ID (image-spec config.md) with how the files got
// their owners, since a copy shares the files' owners too. A snapshot is
// made inside the image's temporary directory and moved into chains/ only
// when the image is complete, so a killed pull leaves none; like a rootfs
// it is never written to. Snapshots go (Prune, and Remove of an image) when
// no stored image has their layers below its own; pulls hold the pulls lock
// shared while they read them and removal holds it alone, so none goes
// while it is being copied. Removing one unlinks names only: an image
// copied from it keeps its files.

// snapshot is the record of a stored snapshot.
type snapshot struct {
	ChainID v1.Hash   `json:"chain_id"`
	DiffIDs []v1.Hash `json:"diff_ids"`
	Owners  string    `json:"owners"` // as Image.Owners
	Size    int64     `json:"size"`   // bytes of file data, as Image.Size
}

// defaultSnapshotMin is the least compressed size of layers a snapshot
// must save a sibling from fetching and extracting again: below it the
// copy costs more in inodes than it saves.
const defaultSnapshotMin = 1 << 20

// chainIDs returns the chain ID of each prefix of diffIDs:
// ChainID(L0) = DiffID(L0), ChainID(L0..Ln) = sha256(ChainID(L0..Ln-1) + " " + DiffID(Ln)).
func chainIDs(diffIDs []v1.Hash) []v1.Hash {
	out := make([]v1.Hash, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1].String() + " " + d.String()))
		out[i] = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	}
	return out
}

func snapshotName(chain v1.Hash, owners string) string {
	sum := sha256.Sum256([]byte(chain.String() + "\n" + owners))
	return hex.EncodeToString(sum[:])
}

func (s *Store) chainDir(name string) string { return filepath.Join(s.dir, "chains", name) }

// snapshots returns the stored snapshots, their rootfs by name.
func (s *Store) snapshots() map[string]*snapshot {
	dirs, err := os.ReadDir(filepath.Join(s.dir, "chains"))
	if err != nil {
		return nil
	}
	out := map[string]*snapshot{}
	for _, d := range dirs {
		if sn, err := s.readSnapshot(d.Name()); err == nil {
			out[d.Name()] = sn
		}
	}
	return out
}

func (s *Store) readSnapshot(name string) (*snapshot, error) {
	b, err := os.ReadFile(filepath.Join(s.chainDir(name), "snapshot.json"))
	if err != nil {
		return nil, err
	}
	var sn snapshot
	if err := json.Unmarshal(b, &sn); err != nil {
		return nil, fmt.Errorf("%s: broken snapshot record: %w", s.chainDir(name), err)
	}
	if len(sn.DiffIDs) == 0 {
		return nil, fmt.Errorf("%s: a snapshot of no layers", s.chainDir(name))
	}
	return &sn, nil
}

// planSnapshots says after which of its own layers the image keeps a
// snapshot: never after its last (the image is that), and otherwise once
// the layers since the last snapshot (or its base) weigh at least min and
// a quarter of all below: a sibling then redoes at most that much of what
// it shares, and snapshots of a many-layered image stay few (each copies
// every file below it).
func planSnapshots(sizes []int64, first int, min int64) []bool {
	at := make([]bool, len(sizes))
	var below, since int64
	for i, n := range sizes {
		if i >= len(sizes)-1 {
			break
		}
		below += n
		if i < first {
			continue
		}
		since += n
		if since >= min && 4*since >= below {
			at[i] = true
			since = 0
		}
	}
	return at
}

// takenSnapshot is a snapshot made during a flattening, in its temporary
// directory until the image is complete.
type takenSnapshot struct {
	name string
	rec  snapshot
}

// afterLayer keeps a snapshot of the rootfs after layer i if planned.
func (f *flattening) afterLayer(i int) error {
	if !f.snapAt[i] {
		return nil
	}
	chain := chainIDs(f.img.DiffIDs[:i+1])[i]
	name := snapshotName(chain, f.img.Owners)
	if _, err := os.Stat(f.s.chainDir(name)); err == nil {
		return nil // a sibling pulled meanwhile kept it already
	}
	dir := filepath.Join(f.tmp, "chains", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	if err := f.ext.snapshot(filepath.Join(dir, "rootfs")); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	f.snaps = append(f.snaps, takenSnapshot{name: name, rec: snapshot{
		ChainID: chain,
		DiffIDs: f.img.DiffIDs[:i+1],
		Owners:  f.img.Owners,
		Size:    f.baseSize + f.ext.counts().Bytes,
	}})
	return nil
}

// keepSnapshots moves the snapshots made into chains/, just before the
// image itself goes into place. One a sibling kept meanwhile stays and
// ours goes.
func (f *flattening) keepSnapshots(ctx context.Context) error {
	if len(f.snaps) == 0 {
		return nil
	}
	for _, sn := range f.snaps {
		dir := filepath.Join(f.tmp, "chains", sn.name)
		b, err := json.MarshalIndent(sn.rec, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, "snapshot.json"), b); err != nil {
			return explainDiskError(err, f.s.dir)
		}
		err = os.Rename(dir, f.s.chainDir(sn.name))
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			err = userns.RemoveAll(ctx, dir)
		}
		if err != nil {
			return fmt.Errorf("keep snapshot: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(f.tmp, "chains")); err != nil {
		return err
	}
	return syncDir(filepath.Join(f.s.dir, "chains"))
}

// dropSnapshots removes the snapshots no stored image has below its own
// layers, and any a killed commit left half-named. The caller holds the
// pulls lock alone, so no pull is copying one.
func (s *Store) dropSnapshots(ctx context.Context) (int, error) {
	dirs, err := os.ReadDir(filepath.Join(s.dir, "chains"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	if len(dirs) == 0 {
		return 0, nil
	}
	var stacks [][]v1.Hash
	imgs, err := os.ReadDir(filepath.Join(s.dir, "images"))
	if err != nil {
		return 0, err
	}
	for _, d := range imgs {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if img, err := s.byDigest(v1.Hash{Algorithm: "sha256", Hex: d.Name()}); err == nil {
			stacks = append(stacks, img.DiffIDs)
		}
	}
	n := 0
	for _, d := range dirs {
		sn, err := s.readSnapshot(d.Name())
		if err == nil && underAny(sn.DiffIDs, stacks) {
			continue
		}
		if err := userns.RemoveAll(ctx, s.chainDir(d.Name())); err != nil {
			return n, fmt.Errorf("remove snapshot: %w", err)
		}
		n++
	}
	return n, nil
}

// underAny says whether prefix is a prefix of one of stacks.
func underAny(prefix []v1.Hash, stacks [][]v1.Hash) bool {
	for _, st := range stacks {
		if isPrefix(prefix, st) {
			return true
		}
	}
	return false
}

func isPrefix(prefix, of []v1.Hash) bool {
	if len(prefix) > len(of) {
		return false
	}
	for i, h := range prefix {
		if of[i] != h {
			return false
		}
	}
	return true
}
