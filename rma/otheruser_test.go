package rma

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/internal/otheruser"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/shmfile"
)

// TestOtherUserSquatsWindow: another user that made files at the names of
// a job's first windows' handover directories (names it could only know
// with the job's key) has Allocate refuse them with the *fdpass.Error
// naming the window and the name (shmfile.ErrNotPrivate); its files keep
// their bytes.
func TestOtherUserSquatsWindow(t *testing.T) {
	otheruser.Require(t)
	ep, err := nemesis.Join(launch.NewJobName(), 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	var names []string
	for id := range 4 {
		n := filepath.Join("/dev/shm", fmt.Sprintf("%s%s-%s-w%d", shmPrefix, ep.Job(), ep.JobKey().Name("rma/window"), id))
		otheruser.Precreate(t, n)
		names = append(names, n)
	}
	_, err = Allocate(ep, 4096, nil)
	var e *fdpass.Error
	if !errors.As(err, &e) || e.Object != windowObject || e.Path != names[0] || !errors.Is(err, shmfile.ErrNotPrivate) || !strings.Contains(e.Reason, "not a directory") {
		t.Fatalf("Allocate over another user's file: %v, want the *fdpass.Error of the window at %s, not a directory", err, names[0])
	}
	for _, n := range names {
		if b, _ := os.ReadFile(n); string(b) != "squatter" {
			t.Fatalf("%s holds %q, want the other user's bytes", n, b)
		}
	}
}
