package knemlmt

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/knemesis/knemesis/kmod/knem"
)

// Node is what decides whether a process may open the device: the
// node's mode bits, owner and group.
type Node struct {
	Mode     fs.FileMode
	UID, GID uint32
}

// Creds are the identity a process opens the device with.
type Creds struct {
	UID    uint32
	Groups []uint32 // effective gid first, then the supplementary groups
}

// DeniedReason explains why a process with creds may not open the device
// node n at knem.DevicePath, and how a site fixes it. The udev rule
// shipped beside the module (99-knem.rules, MODE 0666 as KNEM's own)
// is the fix: the module checks access per region, not per open.
func DeniedReason(n Node, c Creds) (reason, fix string) {
	const rule = "install kmod/knem/99-knem.rules in /etc/udev/rules.d (MODE 0666, as KNEM's) and reload the module, or chmod 0666 " + knem.DevicePath
	perm := n.Mode.Perm()
	who := fmt.Sprintf("%s has mode %04o, owner uid %d, group %d; this process runs as uid %d in groups %s",
		knem.DevicePath, uint32(perm), n.UID, n.GID, c.UID, groupList(c.Groups))
	owner, inGroup := c.UID == n.UID, slices.Contains(c.Groups, n.GID)
	switch {
	case n.Mode&fs.ModeCharDevice == 0:
		return knem.DevicePath + " is not a character device (mode " + n.Mode.String() + "): something other than the module's udev rule made it",
			"rm " + knem.DevicePath + ", then reload the module so that udev creates the node"
	case owner && perm&0o600 != 0o600:
		return who + ": the owner lacks read-write permission", rule
	case !owner && inGroup && perm&0o060 != 0o060:
		return who + ": the group lacks read-write permission", rule
	case !owner && !inGroup && perm&0o006 != 0o006 && perm&0o060 == 0o060:
		return who + ": only the owner and group " + strconv.Itoa(int(n.GID)) + " may open it, and this process is in neither",
			"add the user to group " + strconv.Itoa(int(n.GID)) + " (usermod -aG, then log in again), or " + rule
	case !owner && !inGroup && perm&0o006 != 0o006:
		return who + ": only its owner may open it", rule
	}
	// The mode allows it: an LSM (SELinux, AppArmor) or a container's
	// device cgroup refused.
	return who + ": the mode allows the open, so a security module or the container's device cgroup refused it",
		"allow the device in the policy (docker: --device " + knem.DevicePath + ")"
}

// nodeAndCreds reads the device node and this process's credentials.
func nodeAndCreds() (Node, Creds, error) {
	fi, err := os.Stat(knem.DevicePath)
	if err != nil {
		return Node{}, Creds{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Node{}, Creds{}, fmt.Errorf("%s: no owner in %T", knem.DevicePath, fi.Sys())
	}
	c := Creds{UID: uint32(os.Geteuid()), Groups: []uint32{uint32(os.Getegid())}}
	groups, err := os.Getgroups()
	if err != nil {
		return Node{}, Creds{}, err
	}
	for _, g := range groups {
		if !slices.Contains(c.Groups, uint32(g)) {
			c.Groups = append(c.Groups, uint32(g))
		}
	}
	return Node{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid}, c, nil
}

func groupList(gs []uint32) string {
	s := ""
	for i, g := range gs {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(int(g))
	}
	return s
}
