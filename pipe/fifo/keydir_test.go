package fifo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
)

// keyedChannel is the pipe Channel of rank of a job of two named job with
// key, whose private directory is dir.
func keyedChannel(t *testing.T, dir, job string, key jobkey.Key, rank int) *Channel {
	t.Helper()
	c := (&lmt.Config{Rank: rank, Size: 2, Job: job}).WithDefaults()
	return NewChannel("pipe", &lmt.Env{Rank: rank, Size: 2, Job: job, Key: key, Dir: dir, Config: &c}, nil)
}

// TestFifoDirFromKey: a job with a key has its FIFOs in a directory named
// from the key inside the job's directory, another for another key of the
// same job name, so that knowing the job's name tells nobody where they
// are; the job's directory holds nothing else. The receiver's FIFO there
// is opened by the sender, and both Closes leave nothing. A job without a
// key keeps its FIFOs in the job's directory.
func TestFifoDirFromKey(t *testing.T) {
	k1, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	job := "guessable"
	dir := filepath.Join(t.TempDir(), "knemesis-"+job)
	rx, tx := keyedChannel(t, dir, job, k1, 1), keyedChannel(t, dir, job, k1, 0)
	want := filepath.Join(dir, "fifo-"+k1.Name("lmt/fifo"))
	if rx.dir != want || tx.dir != want {
		t.Fatalf("FIFO directories %s and %s, want %s", rx.dir, tx.dir, want)
	}
	if other := keyedChannel(t, dir, job, k2, 1).dir; other == want || !strings.HasPrefix(other, dir+"/fifo-") {
		t.Fatalf("the same job name with another key has its FIFOs in %s, want a directory of its own in %s", other, dir)
	}
	if plain := keyedChannel(t, dir, job, jobkey.Key{}, 1).dir; plain != dir {
		t.Fatalf("a job without a key has its FIFOs in %s, want %s", plain, dir)
	}
	if _, err := rx.pipes.Reader(0); err != nil {
		t.Fatal(err)
	}
	wantListing(t, "after Reader", dir, filepath.Base(want))
	wantListing(t, "after Reader", want, "pipe-0-1")
	if _, err := tx.pipes.Writer(1); err != nil {
		t.Fatal(err)
	}
	rx.Close()
	tx.Close()
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the job's directory after both Closes: %v, want it gone", err)
	}
}

// TestForeignJobDirRefused: a job's directory that belongs to another
// user, which could rename the key's directory inside it away and put its
// own there, is refused even though the key's directory would be ours,
// naming the owner, and no pipe is made. Giving a directory away takes
// CAP_CHOWN (root in CI, which runs this test).
func TestForeignJobDirRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lacks root: making a directory owned by another uid needs CAP_CHOWN")
	}
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	rx := keyedChannel(t, theirs, "theirs", key, 1)
	_, err = rx.pipes.Reader(0)
	rx.Close()
	want := "private directory " + theirs + " belongs to uid 65534, not to this process (uid 0)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Reader under a job directory of uid 65534: %v, want an error saying %q", err, want)
	}
	if names, _ := os.ReadDir(rx.dir); len(names) != 0 {
		t.Errorf("the key's directory holds %v after the refusal, want nothing", names)
	}
}
