package knemlmt

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/lmt"
)

// A site's /dev/knem that this process may not open is explained from
// the node's mode, owner and group and the process's credentials.
func TestDeniedReason(t *testing.T) {
	const rule = "install kmod/knem/99-knem.rules in /etc/udev/rules.d (MODE 0666, as KNEM's) and reload the module, or chmod 0666 /dev/knem"
	dev := fs.ModeDevice | fs.ModeCharDevice
	user := Creds{UID: 1000, Groups: []uint32{1000, 27}}
	for _, c := range []struct {
		name        string
		node        Node
		creds       Creds
		reason, fix string
	}{
		{"owner only", Node{dev | 0o600, 0, 0}, user,
			"/dev/knem has mode 0600, owner uid 0, group 0; this process runs as uid 1000 in groups 1000,27: only its owner may open it", rule},
		{"wrong group", Node{dev | 0o660, 0, 120}, user,
			"/dev/knem has mode 0660, owner uid 0, group 120; this process runs as uid 1000 in groups 1000,27: only the owner and group 120 may open it, and this process is in neither",
			"add the user to group 120 (usermod -aG, then log in again), or " + rule},
		{"group without write", Node{dev | 0o640, 0, 27}, user,
			"/dev/knem has mode 0640, owner uid 0, group 27; this process runs as uid 1000 in groups 1000,27: the group lacks read-write permission", rule},
		{"owner without write", Node{dev | 0o444, 1000, 0}, user,
			"/dev/knem has mode 0444, owner uid 1000, group 0; this process runs as uid 1000 in groups 1000,27: the owner lacks read-write permission", rule},
		{"mode allows: an LSM or cgroup refused", Node{dev | 0o666, 0, 0}, user,
			"/dev/knem has mode 0666, owner uid 0, group 0; this process runs as uid 1000 in groups 1000,27: the mode allows the open, so a security module or the container's device cgroup refused it",
			"allow the device in the policy (docker: --device /dev/knem)"},
		{"a regular file", Node{0o666, 0, 0}, user,
			"/dev/knem is not a character device (mode -rw-rw-rw-): something other than the module's udev rule made it",
			"rm /dev/knem, then reload the module so that udev creates the node"},
	} {
		reason, fix := DeniedReason(c.node, c.creds)
		if reason != c.reason || fix != c.fix {
			t.Errorf("%s:\n got %q\n     %q\nwant %q\n     %q", c.name, reason, fix, c.reason, c.fix)
		}
	}
}

// Each way knem.Open fails becomes an *lmt.Unavailable with the reason
// and the fix, still wrapping the sentinel.
func TestUnavailableReasons(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: open /dev/knem: %v", knem.ErrNoDevice, unix.ENOENT),
			"lmt: backend knem unavailable: no /dev/knem: the knem module is not loaded (fix: load it (modprobe knem, or insmod kmod/knem/module/knem.ko) and install kmod/knem/99-knem.rules)"},
		{fmt.Errorf("%w: /dev/knem speaks ABI %#x, want %#x", knem.ErrABI, 0xc, knem.ABIVersion),
			"lmt: backend knem unavailable: knem: driver ABI mismatch: /dev/knem speaks ABI 0xc, want 0xd (fix: unload the knem module loaded now (rmmod knem: another KNEM build), then load this tree's (make install puts it under DKMS; modprobe knem))"},
	} {
		err := unavailable(c.err)
		var u *lmt.Unavailable
		if !errors.As(err, &u) || err.Error() != c.want || !errors.Is(err, c.err) {
			t.Errorf("unavailable(%v) = %v\nwant %s", c.err, err, c.want)
		}
	}
}
