package knem

// Cookies crossing process boundaries, other users, and processes that die
// with regions and copies in flight. Each test is a job of
// nemesis/launch/launchtest: the test binary re-executes itself per rank.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// nobody is the unprivileged user the uid tests run a rank as.
const nobody = 65534

// jobStall is how long a job may go with no rank reporting progress
// (launchtest.Options.Timeout): every put on the board reports some.
const jobStall = 3 * time.Minute

// job runs fn as a job of procs ranks sharing a board. Ranks listed in
// asNobody run as uid/gid 65534.
func job(t *testing.T, procs int, asNobody []int, fn func(p launch.Proc, b board) error) {
	t.Helper()
	if _, child := launch.Self(); !child {
		open(t) // skip on the host, fail in the guest, before forking
		if len(asNobody) > 0 && os.Geteuid() != 0 {
			if inGuest {
				t.Fatal("the guest tests run as root")
			}
			t.Skip("lacks root: running a rank as another user needs root")
		}
	}
	b := newBoard(t)
	launchtest.RunOpts(t, procs, launchtest.Options{
		Timeout: jobStall,
		Env:     []string{envBoard + "=" + string(b)},
		Setup: func(rank int, cmd *exec.Cmd) error {
			for _, r := range asNobody {
				if r == rank {
					cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
				}
			}
			return nil
		},
	}, func(p launch.Proc) error { return fn(p, b) })
}

func TestCookiesAcrossProcesses(t *testing.T) {
	for _, procs := range []int{2, 4} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			job(t, procs, nil, exchangeAll)
		})
	}
}

// exchangeAll: every rank reads every other rank's region (on each engine
// in turn) and writes its payload into its right neighbour's region.
func exchangeAll(p launch.Proc, b board) error {
	d, err := Open()
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := d.MapStatus(1)
	if err != nil {
		return err
	}
	defer s.Unmap()
	size := func(r int) int { return 1<<20 + 977*r }
	mine := payload(uint64(1000+p.Rank), size(p.Rank))
	src, err := d.CreateRegion(split(mine, 4095, 70000), ProtRead, 0)
	if err != nil {
		return err
	}
	left := (p.Rank + p.Size - 1) % p.Size
	inbox := newGuarded(size(left))
	dst, err := d.CreateRegion([][]byte{inbox.body}, ProtWrite, 0)
	if err != nil {
		return err
	}
	b.put(fmt.Sprintf("src.%d", p.Rank), uint64(src))
	b.put(fmt.Sprintf("dst.%d", p.Rank), uint64(dst))

	dma := (Flags)(0)
	if info, _ := d.Info(); info.Features&FeatureDMA != 0 {
		dma = FlagDMA
	}
	flags := []Flags{0, FlagMemcpyThread, dma, dma | FlagAsyncDMAComplete}
	for i := 1; i < p.Size; i++ {
		r := (p.Rank + i) % p.Size
		c, err := b.get(fmt.Sprintf("src.%d", r))
		if err != nil {
			return err
		}
		for _, f := range flags {
			got := make([]byte, size(r))
			slot, _ := s.Alloc()
			st, err := d.InlineCopy(Read, split(got, 3, 100000), Cookie(c), 0, All, f, slot)
			if err != nil {
				return fmt.Errorf("reading rank %d's region (flags %#x): %w", r, f, err)
			}
			if st == StatusPending {
				if st, err = s.Wait(slot, time.Minute); err != nil {
					return err
				}
			}
			s.Free(slot)
			if st != StatusSuccess {
				return fmt.Errorf("reading rank %d's region (flags %#x): status %v", r, f, st)
			}
			if want := payload(uint64(1000+r), size(r)); checksum(got) != checksum(want) {
				return fmt.Errorf("rank %d's payload arrived with checksum %#x, want %#x (flags %#x)",
					r, checksum(got), checksum(want), f)
			}
		}
	}
	right := (p.Rank + 1) % p.Size
	c, err := b.get(fmt.Sprintf("dst.%d", right))
	if err != nil {
		return err
	}
	if st, err := d.InlineCopy(Write, [][]byte{mine}, Cookie(c), 0, All, 0, 0); err != nil || st != StatusSuccess {
		return fmt.Errorf("writing into rank %d: %v, %v", right, st, err)
	}
	// COPY from another process's region into a region of this one.
	if p.Size > 2 {
		scratch := newGuarded(size(left))
		sc, err := d.CreateRegion([][]byte{scratch.body}, ProtWrite, FlagSingleUse)
		if err != nil {
			return err
		}
		lc, err := b.get(fmt.Sprintf("src.%d", left))
		if err != nil {
			return err
		}
		if st, err := d.Copy(Cookie(lc), 0, sc, 0, All, 0, 0); err != nil || st != StatusSuccess {
			return fmt.Errorf("COPY from rank %d's region: %v, %v", left, st, err)
		}
		if want := payload(uint64(1000+left), size(left)); checksum(scratch.body) != checksum(want) {
			return fmt.Errorf("COPY from rank %d: checksum %#x, want %#x", left, checksum(scratch.body), checksum(want))
		}
	}
	// Keep the regions until everybody is done with them, and the memory
	// under src with them: mine is not read here after the write above, and
	// without this the collector may free it and the next allocation (the
	// COPY's scratch buffer) overwrite the pages the region pins while the
	// right neighbour still COPYs from them.
	if err := b.barrier(p.Rank, p.Size, "written"); err != nil {
		return err
	}
	runtime.KeepAlive(mine)
	if want := payload(uint64(1000+left), size(left)); checksum(inbox.body) != checksum(want) {
		return fmt.Errorf("inbox from rank %d: checksum %#x, want %#x", left, checksum(inbox.body), checksum(want))
	}
	return b.barrier(p.Rank, p.Size, "done")
}

func TestOtherUsers(t *testing.T) {
	job(t, 2, []int{1}, func(p launch.Proc, b board) error {
		d, err := Open()
		if err != nil {
			return err
		}
		defer d.Close()
		data := payload(77, 40000)
		if p.Rank == 0 { // root
			priv, err := d.CreateRegion([][]byte{data}, ProtRead, 0)
			if err != nil {
				return err
			}
			shared := make([]byte, 40000)
			anyUser, err := d.CreateRegion([][]byte{shared}, ProtRead|ProtWrite, FlagAnyUserAccess)
			if err != nil {
				return err
			}
			copy(shared, data)
			b.put("private", uint64(priv))
			b.put("any", uint64(anyUser))
			if err := b.barrier(0, 2, "used"); err != nil {
				return err
			}
			theirs, err := b.get("nobody")
			if err != nil {
				return err
			}
			_, err = d.InlineCopy(Read, [][]byte{make([]byte, 100)}, Cookie(theirs), 0, All, 0, 0)
			if !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("root reading nobody's private region: %v, want EPERM", err)
			}
			want := payload(78, 40000)
			if checksum(shared) != checksum(want) {
				return fmt.Errorf("nobody's write into the ANY_USER_ACCESS region: checksum %#x, want %#x",
					checksum(shared), checksum(want))
			}
			return b.barrier(0, 2, "done")
		}
		// Rank 1, uid 65534.
		if os.Geteuid() != nobody {
			return fmt.Errorf("rank 1 runs as uid %d, want %d", os.Geteuid(), nobody)
		}
		priv, err := b.get("private")
		if err != nil {
			return err
		}
		anyUser, err := b.get("any")
		if err != nil {
			return err
		}
		buf := make([]byte, 40000)
		mine, err := d.CreateRegion([][]byte{make([]byte, 40000)}, ProtRead|ProtWrite, 0)
		if err != nil {
			return err
		}
		for what, err := range map[string]error{
			"reading root's private region": func() error {
				_, err := d.InlineCopy(Read, [][]byte{buf}, Cookie(priv), 0, All, 0, 0)
				return err
			}(),
			"writing root's private read-only region (uid before protection)": func() error {
				_, err := d.InlineCopy(Write, [][]byte{buf}, Cookie(priv), 0, All, 0, 0)
				return err
			}(),
			"COPY from root's private region": func() error {
				_, err := d.Copy(Cookie(priv), 0, mine, 0, All, 0, 0)
				return err
			}(),
		} {
			if !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("%s: %v, want EPERM", what, err)
			}
		}
		if err := d.DestroyRegion(Cookie(anyUser)); !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("destroying root's region: %v, want EINVAL", err)
		}
		if st, err := d.InlineCopy(Read, [][]byte{buf}, Cookie(anyUser), 0, All, 0, 0); err != nil || st != StatusSuccess {
			return fmt.Errorf("reading root's ANY_USER_ACCESS region: %v, %v", st, err)
		}
		if checksum(buf) != checksum(data) {
			return fmt.Errorf("ANY_USER_ACCESS read: checksum %#x, want %#x", checksum(buf), checksum(data))
		}
		if st, err := d.InlineCopy(Write, [][]byte{payload(78, 40000)}, Cookie(anyUser), 0, All, 0, 0); err != nil || st != StatusSuccess {
			return fmt.Errorf("writing root's ANY_USER_ACCESS region: %v, %v", st, err)
		}
		b.put("nobody", uint64(mine))
		if err := b.barrier(1, 2, "used"); err != nil {
			return err
		}
		return b.barrier(1, 2, "done")
	})
}

// TestExitReleasesPins: a process that exits with regions, a status array
// and asynchronous copies in flight, never closing anything, leaves no page
// pinned; neither does one killed by SIGKILL in the middle.
func TestExitReleasesPins(t *testing.T) {
	leave := func(launch.Proc, board) error { return pinAndLeave(false) }
	if _, child := launch.Self(); child {
		job(t, 1, nil, leave)
		return // the pins are checked by the parent, once this process is gone
	}
	open(t)
	waitUnpinned(t, "before the test (an earlier test leaked)")
	job(t, 1, nil, leave)
	waitUnpinned(t, "after a process exited with regions and copies in flight")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=pin-and-hang")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q, %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitUnpinned(t, "after SIGKILL of a process with regions and copies in flight")
}

// envHelper makes the test binary run a helper instead of the tests.
const envHelper = "KNEM_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "pin-and-hang" {
		if err := pinAndLeave(true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// pinAndLeave creates regions and starts asynchronous copies, then returns
// without releasing anything, or with hang, says "ready" and sleeps until
// killed.
func pinAndLeave(hang bool) error {
	d, err := Open()
	if err != nil {
		return err
	}
	s, err := d.MapStatus(1)
	if err != nil {
		return err
	}
	for i := range 8 {
		src := payload(uint64(i), 4<<20)
		c, err := d.CreateRegion([][]byte{src}, ProtRead, 0)
		if err != nil {
			return err
		}
		slot, _ := s.Alloc()
		dst := make([]byte, 4<<20)
		if _, err := d.InlineCopy(Read, [][]byte{dst}, c, 0, All, FlagMemcpyThread, slot); err != nil {
			return err
		}
		heapSink = append(heapSink, src, dst) // keep them until exit
	}
	if hang {
		fmt.Println("ready")
		time.Sleep(time.Hour) // until killed
	}
	return nil
}
