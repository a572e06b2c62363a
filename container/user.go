package container

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// User is a resolved user: ids, supplementary groups and home.
type User struct {
	UID, GID uint32
	Groups   []uint32
	Home     string
}

// Bounds on what we read of the image's account files: they come from the
// image and may be hostile (an unbounded parse is a denial of service,
// CVE-2026-47262).
const (
	maxAccountFile = 4 << 20
	maxAccountLine = 64 << 10
)

// LookupUser resolves spec ("", "name", "uid", "name:group", "uid:gid")
// against an image's passwd and group files, as a process of the
// container started as spec would run.
func LookupUser(spec, passwdPath, groupPath string) (User, error) {
	return lookupUser(spec, passwdPath, groupPath)
}

// lookupUser resolves spec ("", "name", "uid", "name:group", "uid:gid")
// against passwd and group files of the container.
func lookupUser(spec, passwdPath, groupPath string) (User, error) {
	u := User{Home: "/"}
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" {
		name = "0"
	}
	var entry []string
	if id, err := strconv.ParseUint(name, 10, 32); err == nil {
		u.UID = uint32(id)
		entry, _ = findEntry(passwdPath, func(f []string) bool { return len(f) >= 7 && f[2] == name })
	} else {
		var err error
		entry, err = findEntry(passwdPath, func(f []string) bool { return len(f) >= 7 && f[0] == name })
		if err != nil || entry == nil {
			return u, fmt.Errorf("user %q: not in the image's /etc/passwd", name)
		}
		id, err := strconv.ParseUint(entry[2], 10, 32)
		if err != nil {
			return u, fmt.Errorf("user %q: bad uid %q in /etc/passwd", name, entry[2])
		}
		u.UID = uint32(id)
	}
	userName := ""
	if entry != nil {
		if gid, err := strconv.ParseUint(entry[3], 10, 32); err == nil {
			u.GID = uint32(gid)
		}
		u.Home, userName = entry[5], entry[0]
	}
	if hasGroup {
		if id, err := strconv.ParseUint(group, 10, 32); err == nil {
			u.GID = uint32(id)
		} else {
			g, err := findEntry(groupPath, func(f []string) bool { return len(f) >= 3 && f[0] == group })
			if err != nil || g == nil {
				return u, fmt.Errorf("group %q: not in the image's /etc/group", group)
			}
			id, err := strconv.ParseUint(g[2], 10, 32)
			if err != nil {
				return u, fmt.Errorf("group %q: bad gid %q in /etc/group", group, g[2])
			}
			u.GID = uint32(id)
		}
	}
	// Supplementary groups: those listing the user by name.
	u.Groups = []uint32{u.GID}
	if userName != "" {
		_, _ = findEntry(groupPath, func(f []string) bool {
			if len(f) < 4 {
				return false
			}
			for _, m := range strings.Split(f[3], ",") {
				if m == userName {
					if id, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(id) != u.GID && len(u.Groups) < 64 {
						u.Groups = append(u.Groups, uint32(id))
					}
				}
			}
			return false
		})
	}
	return u, nil
}

// findEntry returns the fields of the first line of a colon-separated
// account file that match, reading at most maxAccountFile bytes and
// skipping over-long lines. A missing file matches nothing.
func findEntry(path string, match func([]string) bool) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountFile))
	sc.Buffer(make([]byte, 4096), maxAccountLine)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if fields := strings.Split(line, ":"); match(fields) {
			return fields, nil
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s: a line longer than %d bytes", path, maxAccountLine)
	}
	return nil, sc.Err()
}
