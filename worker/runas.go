package worker

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
)

// credential is the user commands run as (Config.RunAs).
type credential struct {
	name     string
	uid, gid uint32
	groups   []uint32 // supplementary groups
	home     string
}

// lookupRunAs checks that the worker can switch to the user name (it must run as root) and
// returns the user's ids, supplementary groups and home directory. name may be a user name
// or a numeric uid.
func lookupRunAs(name string) (*credential, error) {
	if euid := os.Geteuid(); euid != 0 {
		return nil, fmt.Errorf("RunAs %q: the worker must run as root to switch users (it runs as uid %d)", name, euid)
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("RunAs %q: no such user: %w", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("RunAs %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("RunAs %q: gid %q: %w", name, u.Gid, err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("RunAs %q: supplementary groups: %w", name, err)
	}
	c := &credential{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("RunAs %q: group id %q: %w", name, id, err)
		}
		c.groups = append(c.groups, uint32(g))
	}
	return c, nil
}
