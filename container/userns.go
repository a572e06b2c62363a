package container

import (
	"context"

	"github.com/cove-sh/cove/internal/userns"
)

// IDRange is a range of host ids a user may map into a user namespace
// (a line of /etc/subuid or /etc/subgid).
type IDRange = userns.IDRange

// subIDMapping says how a rootless container's ids map: container root is
// the user, and where newuidmap, newgidmap and subordinate ranges exist,
// ids 1…N are the user's ranges, so images with other users work. It is
// the mapping the image store extracts through (internal/userns).
type subIDMapping struct{ m userns.IDMap }

// rangedMapping returns the mapping with subordinate ranges, or false when
// they cannot be used (then the single id mapping is all there is).
func rangedMapping() (subIDMapping, bool) {
	m := userns.Current()
	return subIDMapping{m}, m.Ranged
}

// apply writes the maps of pid's user namespace with the setuid helpers.
func (m subIDMapping) apply(pid int) error { return m.m.Apply(context.Background(), pid) }

// IDMap is how the ids of a container started with Spec.UserNS map to the
// host's: the user is root inside and, when Ranged, ids 1…Count inside are
// the user's subordinate ranges from Start on.
type IDMap = userns.IDMap

// RootlessIDMap returns the mapping Start gives a container with UserNS
// when run by this process's user.
func RootlessIDMap() IDMap { return userns.Current() }
