// Package userns runs parts of cove in a user namespace mapped through the
// user's subordinate ids, as podman's rootless storage does (`podman
// unshare`): there the user is root over the ids an image's files have, so
// layers are extracted with their owners, read and diffed whatever their
// modes, cloned by hardlink (protected_hardlinks refuses linking another
// id's file) and removed. The cove binary is re-executed as a helper for
// that (HelperArg, then Main); root needs none of it.
package userns

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// IDRange is a range of host ids a user may map into a user namespace
// (a line of /etc/subuid or /etc/subgid).
type IDRange struct {
	Start, Count int
}

// IDMap is how the ids of a rootless user namespace map to the host's:
// the user is root inside and, when Ranged, ids 1…Count inside are the
// user's subordinate ranges from Start on. Containers, the image store and
// the build cache all use this one mapping, so that uid N of an image is
// the same host id wherever it is seen.
type IDMap struct {
	UID, GID       int
	Ranged         bool
	UIDSub, GIDSub IDRange
}

// Current returns the mapping for this process's user: Ranged where
// newuidmap, newgidmap and ranges in /etc/subuid and /etc/subgid exist.
// Root's is root's own, whatever those files say: it owns every id, and
// nothing it does maps them (so it skips the path search and the reads,
// which every start of a container made).
func Current() IDMap {
	m := IDMap{UID: os.Geteuid(), GID: os.Getegid()}
	if m.UID == 0 {
		return m
	}
	if _, err := exec.LookPath("newuidmap"); err != nil {
		return m
	}
	if _, err := exec.LookPath("newgidmap"); err != nil {
		return m
	}
	var ok1, ok2 bool
	m.UIDSub, ok1 = SubIDs("/etc/subuid", m.UID)
	m.GIDSub, ok2 = SubIDs("/etc/subgid", m.UID)
	m.Ranged = ok1 && ok2
	if !m.Ranged {
		m.UIDSub, m.GIDSub = IDRange{}, IDRange{}
	}
	return m
}

// Helps says whether work on files an image or a container made goes
// through the helper: rootless with subordinate ids. Root owns every id
// already; a user without ranges has only their own.
func (m IDMap) Helps() bool { return m.UID != 0 && m.Ranged }

// String names the mapping for records (how a stored rootfs was made):
// "root", "subids UID:START+COUNT GID:START+COUNT", or "user" (every
// file the user's).
func (m IDMap) String() string {
	switch {
	case m.UID == 0:
		return "root"
	case m.Ranged:
		return fmt.Sprintf("subids %d:%d+%d %d:%d+%d", m.UID, m.UIDSub.Start, m.UIDSub.Count, m.GID, m.GIDSub.Start, m.GIDSub.Count)
	}
	return "user"
}

// ToContainer returns the owner a file with host owner uid:gid has inside
// such a namespace; ids the mapping does not cover are returned as they are.
func (m IDMap) ToContainer(uid, gid int) (int, int) {
	return inside(uid, m.UID, m.Ranged, m.UIDSub), inside(gid, m.GID, m.Ranged, m.GIDSub)
}

func inside(id, own int, ranged bool, sub IDRange) int {
	if id == own {
		return 0
	}
	if ranged && id >= sub.Start && id < sub.Start+sub.Count {
		return id - sub.Start + 1
	}
	return id
}

// Apply writes the maps of pid's user namespace with the setuid helpers,
// both at once (each is a setuid exec that reads the range files).
func (m IDMap) Apply(ctx context.Context, pid int) error {
	p := strconv.Itoa(pid)
	cmds := [][]string{
		{"newuidmap", p, "0", strconv.Itoa(m.UID), "1", "1", strconv.Itoa(m.UIDSub.Start), strconv.Itoa(m.UIDSub.Count)},
		{"newgidmap", p, "0", strconv.Itoa(m.GID), "1", "1", strconv.Itoa(m.GIDSub.Start), strconv.Itoa(m.GIDSub.Count)},
	}
	errs := make(chan error, len(cmds))
	for _, c := range cmds {
		go func() {
			if out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%s: %v: %s", c[0], err, strings.TrimSpace(string(out)))
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range cmds {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// SubIDs returns the first range that file (/etc/subuid or /etc/subgid)
// gives the user, by name or id; none is not an error.
func SubIDs(file string, uid int) (IDRange, bool) {
	names := map[string]bool{strconv.Itoa(uid): true}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		names[u.Username] = true
	}
	f, err := os.Open(file)
	if err != nil {
		return IDRange{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 || !names[fields[0]] {
			continue
		}
		start, err1 := strconv.Atoi(fields[1])
		count, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && count > 0 {
			return IDRange{start, count}, true
		}
	}
	return IDRange{}, false
}

// Advice is what a user without subordinate ids loses, and how to get
// them: said once by commands that extract or build, and by cove doctor.
func Advice(user string) string {
	if user == "" {
		user = "$USER"
	}
	return "without subordinate ids (newuidmap/newgidmap from the uidmap package, and ranges in /etc/subuid and /etc/subgid) every file of an image is yours and root's inside, so an image's own users own nothing (a USER's home, apt's _apt directories); add them with: sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 " + user + ", then cove system reset (images pulled before keep no owners)"
}
