package nemesis

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// envLoneCreator makes the test binary rank 0 of a job of two ("job
// key") that waits for ever for rank 1 (TestMain): a creator for a test
// to kill before every rank joined.
const envLoneCreator = "KNEMESIS_TEST_LONE_CREATOR"

func loneCreator(spec string) {
	job, hex, _ := strings.Cut(spec, " ")
	key, err := jobkey.Parse(hex)
	if err == nil {
		_, err = Join(job, 0, 2, &Options{JobKey: key, JoinTimeout: time.Hour})
	}
	fmt.Fprintln(os.Stderr, "lone creator:", err)
	os.Exit(1)
}

// killCreator starts rank 0 of job in a child process, waits until it
// serves the segment at the job's name, kills it with SIGKILL and
// returns that name, which it checks the creator left behind.
func killCreator(t *testing.T, job string, key jobkey.Key) string {
	t.Helper()
	path := segPath("/dev/shm", segmentName(job, key, &Options{}, 0))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envLoneCreator+"="+job+" "+key.Encode())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if served(path) {
			break // the segment is built: rank 0 waits for rank 1
		}
		select {
		case err := <-exited:
			t.Fatalf("the creator exited before serving %s: %v", path, err)
		case <-time.After(time.Millisecond):
		}
	}
	cmd.Process.Kill()
	<-exited
	if _, err := os.Lstat(fdpass.SocketPath(path)); err != nil {
		t.Fatalf("the killed creator's socket: %v, want it left behind for the test", err)
	}
	return path
}

// served says whether the segment is served at path.
func served(path string) bool {
	fd, _, err := fdpass.Fetch(path, segServed, segObject, fdpass.Want{MinSize: headerSize})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// jobLeftovers lists what /dev/shm holds of job.
func jobLeftovers(job string) []string {
	m, _ := filepath.Glob("/dev/shm/knemesis-" + job + "*")
	return m
}

// TestKilledCreatorLeavesNothing: rank 0 is killed (SIGKILL) after it
// serves the segment and before rank 1 joins, which leaves its 0700
// rendezvous directory and socket in /dev/shm. Rank 1's Join fails with
// ErrJoinTimeout naming the creator that is gone, and /dev/shm then holds
// nothing of the job. A creator killed in a job whose other ranks never
// come is cleaned by the next job's rank 0, whatever its name; a live
// job's directory is not touched by it.
func TestKilledCreatorLeavesNothing(t *testing.T) {
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	job := launch.NewJobName()
	path := killCreator(t, job, key)
	_, err = Join(job, 1, 2, &Options{JobKey: key, JoinTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrJoinTimeout) || !strings.Contains(err.Error(), path+" left by a creator that is gone (removed)") {
		t.Errorf("Join of rank 1 after its creator was killed: %v, want ErrJoinTimeout saying it removed %s", err, path)
	}
	if m := jobLeftovers(job); len(m) != 0 {
		t.Errorf("left in /dev/shm after rank 1 gave up: %q", m)
	}

	// A job nobody joins any more, and a live one waiting for its rank 1.
	abandoned := launch.NewJobName()
	killCreator(t, abandoned, key)
	live, liveKey := launch.NewJobName(), testKey
	res := make(chan joined, 2)
	go func() { ep, err := Join(live, 0, 2, &Options{JobKey: liveKey}); res <- joined{0, ep, err} }()
	livePath := segPath("/dev/shm", segmentName(live, liveKey, &Options{}, 0))
	for {
		if served(livePath) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	next, err := Join(launch.NewJobName(), 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	next.Close()
	if m := jobLeftovers(abandoned); len(m) != 0 {
		t.Errorf("left in /dev/shm after the next job's rank 0 joined: %q", m)
	}
	go func() { ep, err := Join(live, 1, 2, &Options{JobKey: liveKey}); res <- joined{1, ep, err} }()
	eps := collect(t, res, 2)
	msg := []byte("the live job still runs")
	if err := eps[0].Send(1, 7, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if st, err := eps[1].Recv(0, 7, buf); err != nil || string(buf[:st.Count]) != string(msg) {
		t.Fatalf("rank 1 of the live job received %q, %v; want %q", buf[:st.Count], err, msg)
	}
}
