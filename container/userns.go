package container

import (
	"bufio"
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

// subIDs returns the first range that /etc/subuid (or /etc/subgid) gives
// the user, by name or id; none is not an error.
func subIDs(file string, uid int) (IDRange, bool) {
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

// subIDMapping says how a rootless container's ids map: container root is
// the user, and where newuidmap, newgidmap and subordinate ranges exist,
// ids 1…N are the user's ranges, so images with other users work.
type subIDMapping struct {
	uid, gid       int
	uidSub, gidSub IDRange
}

// rangedMapping returns the mapping with subordinate ranges, or false when
// they cannot be used (then the single id mapping is all there is).
func rangedMapping() (subIDMapping, bool) {
	m := subIDMapping{uid: os.Geteuid(), gid: os.Getegid()}
	if _, err := exec.LookPath("newuidmap"); err != nil {
		return m, false
	}
	if _, err := exec.LookPath("newgidmap"); err != nil {
		return m, false
	}
	var ok1, ok2 bool
	m.uidSub, ok1 = subIDs("/etc/subuid", m.uid)
	m.gidSub, ok2 = subIDs("/etc/subgid", m.uid)
	return m, ok1 && ok2
}

// apply writes the maps of pid's user namespace with the setuid helpers.
func (m subIDMapping) apply(pid int) error {
	p := strconv.Itoa(pid)
	for _, c := range [][]string{
		{"newuidmap", p, "0", strconv.Itoa(m.uid), "1", "1", strconv.Itoa(m.uidSub.Start), strconv.Itoa(m.uidSub.Count)},
		{"newgidmap", p, "0", strconv.Itoa(m.gid), "1", "1", strconv.Itoa(m.gidSub.Start), strconv.Itoa(m.gidSub.Count)},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", c[0], err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// IDMap is how the ids of a container started with Spec.UserNS map to the
// host's: the user is root inside and, when Ranged, ids 1…Count inside are
// the user's subordinate ranges from Start on.
type IDMap struct {
	UID, GID       int
	Ranged         bool
	UIDSub, GIDSub IDRange
}

// RootlessIDMap returns the mapping Start gives a container with UserNS
// when run by this process's user.
func RootlessIDMap() IDMap {
	m, ok := rangedMapping()
	return IDMap{UID: m.uid, GID: m.gid, Ranged: ok, UIDSub: m.uidSub, GIDSub: m.gidSub}
}

// ToContainer returns the owner a file with host owner uid:gid has inside
// such a container; ids the mapping does not cover are returned as they are.
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
