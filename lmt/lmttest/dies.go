package lmttest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"golang.org/x/sys/unix"
)

// absent is what listing returns for a directory that does not exist.
var absent = []string{"<absent>"}

// listing returns the sorted names in dir, or absent.
func listing(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return absent, nil
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

// wantListing fails unless dir holds exactly want (absent: no directory).
func wantListing(when, dir string, want []string) error {
	got, err := listing(dir)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: %s holds %q, want %q", when, dir, got, want)
	}
	return nil
}

// dieAfterCTS is rank 0's part of the tests below: start a 1 MiB send to
// rank 1 with backend, wait until rank 1's CTS is on the socket, without
// letting the engine see it (so a pipe backend never opens its FIFO), check
// that the job directory holds exactly inWindow, then die by die.
func dieAfterCTS(p launch.Proc, backend string, inWindow []string, die func()) error {
	ch, eng, err := Open(p, backend, nil)
	if err != nil {
		return err
	}
	b := NewBuffer(1<<20, 0, false)
	b.FillMessage()
	rts := make([]byte, 4096)
	_, n, err := eng.StartSend(1, b.Iov, backend, rts)
	if err != nil {
		return err
	}
	if err := ch.SendRTS(1, rts[:n]); err != nil {
		return err
	}
	if err := ch.Await(1, 30*time.Second); err != nil {
		return err
	}
	if err := wantListing("when the CTS arrived", launch.JobDir(p.Job), inWindow); err != nil {
		return err
	}
	die()
	return errors.New("rank 0 outlived its death")
}

// recvFromDying is rank 1's part: receive the message rank 0 starts and
// return the transfer once the CTS is out.
func recvFromDying(p launch.Proc, backend string) (*Channel, *lmt.Engine, *lmt.Transfer, error) {
	ch, eng, err := Open(p, backend, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := ch.NextRTS(0)
	if err != nil {
		return nil, nil, nil, err
	}
	tr, err := eng.StartRecv(0, r, NewBuffer(1<<20, 0, false).Iov)
	return ch, eng, tr, err
}

// RunSenderDiesAfterCTS: the sender dies between the receiver's CTS and
// opening the channel it announces (for the pipe backends, a FIFO the
// receiver made: inWindow lists what the job directory holds then). The
// sender exits as a killed rank does, without closing its Engine, and with
// status 0, so that the launcher lets the receiver carry on: its transfer
// must fail with a PeerError naming rank 0, without having waited for a
// byte, and nothing may be left in the job's directory, by the receiver's
// own doing, before the launcher's clean-up.
func RunSenderDiesAfterCTS(t *testing.T, backend string, inWindow []string) {
	job := NewJob(2)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute, ExitEarly: []int{0}}, func(p launch.Proc) error {
		if p.Rank == 0 {
			return dieAfterCTS(p, backend, inWindow, func() { os.Exit(0) })
		}
		ch, eng, tr, err := recvFromDying(p, backend)
		if err != nil {
			return err
		}
		err = ch.Wait(tr)
		var pe *lmt.PeerError
		if !errors.As(err, &pe) || pe.Rank != 0 || !errors.Is(err, lmt.ErrPeerGone) {
			return fmt.Errorf("receive from a sender dead after the CTS: %v, want a PeerError naming rank 0", err)
		}
		if tr.Moved() != 0 {
			return fmt.Errorf("%d bytes received from a sender that never opened the channel", tr.Moved())
		}
		fmt.Printf("rank 1: %v\n", err)
		// The receiver removed the FIFO's name when it gave up on the
		// transfer, and with it the directory, left empty.
		dir := launch.JobDir(p.Job)
		if err := wantListing("after the PeerError", dir, absent); err != nil {
			return err
		}
		eng.Close()
		return wantListing("after the receiver's Close", dir, absent)
	})
	if _, child := launch.Self(); !child {
		if err := wantListing("after the job", launch.JobDir(name), absent); err != nil {
			t.Error(err)
		}
	}
}

// RunKilledAfterCTS: the sender is killed (SIGKILL) in the same window,
// while the receiver, past its CTS, is busy elsewhere; the launcher then
// kills the receiver too, as it does in a real job, so that no rank removes
// anything. The job's directory must still be gone when the launcher
// returns.
func RunKilledAfterCTS(t *testing.T, backend string, inWindow []string) {
	job := NewJob(2)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute, Killed: []int{0}}, func(p launch.Proc) error {
		if p.Rank == 0 {
			return dieAfterCTS(p, backend, inWindow, func() {
				unix.Kill(os.Getpid(), unix.SIGKILL)
				select {}
			})
		}
		if _, _, _, err := recvFromDying(p, backend); err != nil {
			return err
		}
		time.Sleep(time.Minute) // killed by the launcher
		return errors.New("rank 1 was not killed when rank 0 died")
	})
	if _, child := launch.Self(); !child {
		if err := wantListing("after the job", launch.JobDir(name), absent); err != nil {
			t.Error(err)
		}
	}
}

// shmLeft lists what job left in /dev/shm.
// closeLeavingNothing closes eng, a survivor's engine after its peer's
// death, and checks that /dev/shm holds nothing of job before and after.
func closeLeavingNothing(eng *lmt.Engine, job string) error {
	if m := shmLeft(job); len(m) != 0 {
		return fmt.Errorf("after the PeerError, /dev/shm holds %q", m)
	}
	if err := eng.Close(); err != nil {
		return err
	}
	if m := shmLeft(job); len(m) != 0 {
		return fmt.Errorf("after Close, /dev/shm holds %q", m)
	}
	return nil
}

func shmLeft(job string) []string {
	m, _ := filepath.Glob("/dev/shm/knemesis-" + job + "-*")
	return m
}

// RunReceiverDiesBeforeCTS: the receiver dies once the RTS has reached it,
// before it matches the message (so before any CTS), while the sender has
// started filling the channel early where the backend lets it. The
// sender's transfer must fail with a PeerError naming rank 1, and nothing
// of the job may be left in /dev/shm, neither when it failed nor after
// the sender's Close.
func RunReceiverDiesBeforeCTS(t *testing.T, backend string) {
	job := NewJob(2)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, nil)
		if err != nil {
			return err
		}
		if p.Rank == 1 {
			if _, err := ch.NextRTS(0); err != nil {
				return err
			}
			os.Exit(0) // as a killed rank: no CTS, no Close
		}
		rts := make([]byte, 4096)
		tr, n, err := eng.StartSend(1, NewBuffer(1<<20, 0, false).Iov, backend, rts)
		if err != nil {
			return err
		}
		if err := ch.SendRTS(1, rts[:n]); err != nil {
			return err
		}
		err = ch.Wait(tr)
		var pe *lmt.PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, lmt.ErrPeerGone) || tr.Err() != err {
			return fmt.Errorf("send to a receiver dead before its CTS: %v, want a PeerError naming rank 1", err)
		}
		if err := closeLeavingNothing(eng, p.Job); err != nil {
			return err
		}
		return nil
	})
	if _, child := launch.Self(); !child {
		if m := shmLeft(name); len(m) != 0 {
			t.Errorf("after the job, /dev/shm holds %q", m)
		}
	}
}
