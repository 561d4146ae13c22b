// Package otheruser plays another user of the node in tests: a throwaway
// uid, with no account, that tries to squat, link, read and shrink the
// files a job shares. The test must run as root (go test does in CI);
// without root the helpers skip with `lacks root:`.
//
// Everything the other user makes is removed when the test ends.
package otheruser

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// UID (and GID) of the other user: no account has it, so nothing but the
// test's own files ever belongs to it.
const UID = 61234

// Require skips t unless the test runs as root, which the other user's
// processes need to be started with another uid.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lacks root: starting processes of another uid needs root")
	}
}

// Run runs script with sh as the other user and returns its output and
// whether it failed.
func Run(t testing.TB, script string) (string, error) {
	t.Helper()
	Require(t)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: UID}}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Precreate makes a file at path as the other user, mode 0666 with some
// bytes, before the job comes: the squatter's trap. It is removed when t
// ends.
func Precreate(t testing.TB, path string) {
	t.Helper()
	t.Cleanup(func() { os.Remove(path) })
	if out, err := Run(t, "umask 0; printf squatter > '"+path+"'"); err != nil {
		t.Fatalf("the other user could not create %s: %v: %s", path, err, out)
	}
}

// Symlink makes a symbolic link at path to target as the other user. It is
// removed when t ends.
func Symlink(t testing.TB, target, path string) {
	t.Helper()
	t.Cleanup(func() { os.Remove(path) })
	if out, err := Run(t, "ln -s '"+target+"' '"+path+"'"); err != nil {
		t.Fatalf("the other user could not link %s: %v: %s", path, err, out)
	}
}

// Refused fails t unless every attempt of the other user on the live file
// at path is refused with "Permission denied": reading it, opening it
// for writing, and truncating it.
func Refused(t testing.TB, path string) {
	t.Helper()
	for _, try := range []string{"cat '" + path + "'", ": >> '" + path + "'", "truncate -s 0 '" + path + "'"} {
		out, err := Run(t, try)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("the other user ran %q on %s: %v, output %q; want Permission denied", try, path, err, out)
		}
	}
}

// Sleeper starts a process of the other user that lives until t ends,
// and returns its pid: a number that kill(pid, 0) answers with EPERM.
func Sleeper(t testing.TB) int {
	t.Helper()
	Require(t)
	cmd := exec.Command("/bin/sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: UID}}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a process of the other user: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// AsOther runs f with this process's effective uid set to the other
// user's, on every thread, and sets it back after: what f creates, binds or
// connects carries the other uid (SO_PEERCRED reports the effective uid),
// with no need for a binary the other user could execute. Nothing else of
// the test may run meanwhile.
func AsOther(t testing.TB, f func()) {
	t.Helper()
	Require(t)
	if err := syscall.Setresuid(-1, UID, -1); err != nil {
		t.Fatalf("setting the effective uid to %d: %v", UID, err)
	}
	defer func() {
		if err := syscall.Setresuid(-1, 0, -1); err != nil {
			panic("otheruser: cannot set the effective uid back to root: " + err.Error())
		}
	}()
	f()
}
