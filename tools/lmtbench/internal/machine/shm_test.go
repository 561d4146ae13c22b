package machine

import "testing"

func TestShmCheck(t *testing.T) {
	const fix = "give the container a larger /dev/shm (docker/podman run --shm-size=1g; Kubernetes: an emptyDir with medium Memory mounted there) or mount -o remount,size=1g /dev/shm"
	for _, c := range []struct {
		shm  Shm
		line string
		want string // "" when fine
	}{
		{Shm{Tmpfs: true, Size: 24 << 30, Free: 23 << 30}, "tmpfs, 24 GiB, 23 GiB free", ""},
		{Shm{Tmpfs: true, Size: 64 << 20, Free: 60 << 20}, "tmpfs, 64 MiB, 60 MiB free",
			"/dev/shm: 64 MiB, a container's default: a job whose segment and rings outgrow it fails at nemesis.Join (or, for a program that skips the check, with SIGBUS when the tmpfs fills) — " + fix},
		{Shm{Tmpfs: true, ReadOnly: true, Size: 1 << 30}, "tmpfs, 1 GiB, 0 MiB free",
			"/dev/shm: mounted read-only: no segment can be created — " + fix},
		{Shm{Size: 100 << 30, Free: 50 << 30}, "not tmpfs, 100 GiB, 50 GiB free",
			"/dev/shm: not a tmpfs: segments there would be written back to a disk — mount a tmpfs on /dev/shm (mount -t tmpfs -o size=1g tmpfs /dev/shm)"},
	} {
		if got := c.shm.String(); got != c.line {
			t.Errorf("%+v: String %q, want %q", c.shm, got, c.line)
		}
		err := c.shm.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want no problem", c.shm, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%+v:\n got %v\nwant %s", c.shm, err, c.want)
		}
	}
}

// StatShm reads the real /dev/shm of this machine: a tmpfs with room.
func TestStatShm(t *testing.T) {
	s, err := StatShm()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Tmpfs || s.Size == 0 || s.Free > s.Size {
		t.Errorf("/dev/shm: %+v", s)
	}
}
