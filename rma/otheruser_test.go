package rma

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/knemesis/knemesis/internal/otheruser"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/shmfile"
)

// TestOtherUserSquatsWindow: another user that made files at the names of
// a job's first windows (names it could only know with the job's key) has
// Allocate refuse them with the *shmfile.Error naming the window file and
// its owner; its files keep their bytes.
func TestOtherUserSquatsWindow(t *testing.T) {
	otheruser.Require(t)
	ep, err := nemesis.Join(launch.NewJobName(), 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	var names []string
	for id := range 4 {
		n := filepath.Join("/dev/shm", fmt.Sprintf("%s%s-%s-w%d-p%d", shmPrefix, ep.Job(), ep.JobKey().Name("rma/window"), id, os.Getpid()))
		otheruser.Precreate(t, n)
		names = append(names, n)
	}
	_, err = Allocate(ep, 4096, nil)
	var e *shmfile.Error
	if !errors.As(err, &e) || e.Object != windowObject || e.Owner != otheruser.UID {
		t.Fatalf("Allocate over another user's file: %v, want the *shmfile.Error of the window file, owner %d", err, otheruser.UID)
	}
	for _, n := range names {
		if b, _ := os.ReadFile(n); string(b) != "squatter" {
			t.Fatalf("%s holds %q, want the other user's bytes", n, b)
		}
	}
}
