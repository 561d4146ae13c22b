package fdpass

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// envServeAt makes the test binary a server at the directory it names
// that never closes (TestMain), for a test to kill.
const envServeAt = "FDPASS_TEST_SERVE_AT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envServeAt); dir != "" {
		if _, err := Listen(dir, object); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("serving")
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// killedServer starts a server at dir in a child process and kills it
// with SIGKILL once it serves: what a rank killed before its Close
// leaves.
func killedServer(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envServeAt+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "serving\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child server at %s said %q, %v", dir, line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// TestStaleDirectoryRemoved: a server killed with SIGKILL leaves its
// directory and socket; RemoveIfStale removes them, and a Listen at the
// name then succeeds. A live server's directory is left by
// RemoveIfStale and by Sweep, and stays served.
func TestStaleDirectoryRemoved(t *testing.T) {
	base := t.TempDir()
	dead := filepath.Join(base, "dead")
	killedServer(t, dead)
	if _, err := os.Lstat(SocketPath(dead)); err != nil {
		t.Fatalf("the killed server's socket: %v, want it left behind", err)
	}
	live, _ := serve(t)
	liveDir := live.dir
	if removed, err := RemoveIfStale(liveDir, object); removed || err != nil {
		t.Fatalf("RemoveIfStale of a live server's directory: %v, %v; want false, nil", removed, err)
	}
	if removed, err := RemoveIfStale(dead, object); !removed || err != nil {
		t.Fatalf("RemoveIfStale of a killed server's directory: %v, %v; want true, nil", removed, err)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Fatalf("%s after RemoveIfStale: %v, want it gone", dead, err)
	}
	if _, err := os.Lstat(SocketPath(liveDir)); err != nil {
		t.Fatalf("the live server's socket: %v", err)
	}
	s, err := Listen(dead, object)
	if err != nil {
		t.Fatalf("Listen where a killed server was: %v", err)
	}
	s.Close()
}

// TestSweep: of the entries under a prefix, Sweep removes exactly the
// directories of killed servers: not a live server's, not a private
// directory holding other files (another program's, made by
// os.MkdirTemp), not an empty one (a server between its mkdir and its
// bind), not a plain file, and nothing without the prefix.
func TestSweep(t *testing.T) {
	base := t.TempDir()
	const prefix = "knemesis-"
	var dead []string
	for i := range 3 {
		d := filepath.Join(base, fmt.Sprintf("%sdead%d", prefix, i))
		killedServer(t, d)
		dead = append(dead, d)
	}
	other := filepath.Join(base, "other-dead")
	killedServer(t, other)
	live, err := Listen(filepath.Join(base, prefix+"live"), object)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	tmp, err := os.MkdirTemp(base, prefix+"tmp-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "sock"+".data"), []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(base, prefix+"empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, prefix+"file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := Sweep(base, prefix, object); n != len(dead) {
		t.Errorf("Sweep removed %d directories, want %d", n, len(dead))
	}
	for _, d := range dead {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s after Sweep: %v, want it gone", d, err)
		}
	}
	for _, p := range []string{other, SocketPath(live.dir), filepath.Join(tmp, "sock.data"), empty, file} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s after Sweep: %v, want it kept", p, err)
		}
	}
	if n := Sweep(base, prefix, object); n != 0 {
		t.Errorf("a second Sweep removed %d directories, want 0", n)
	}
	if _, _, err := Fetch(live.dir, "x", object, Want{}); !errors.Is(err, ErrNotServed) {
		t.Errorf("Fetch from the live server after Sweep: %v, want ErrNotServed (it still answers)", err)
	}
}
