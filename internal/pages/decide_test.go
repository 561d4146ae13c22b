package pages

import (
	"slices"
	"testing"
	"testing/fstest"
)

const mib = 1 << 20

// TestDecide: each setup gives its exact mode and notes.
func TestDecide(t *testing.T) {
	pool := System{ShmemTHP: "advise", ShmemTHP2M: "inherit", DevShmHuge: "never", HugePageSize: 2 * mib, HugePagesFree: 8}
	on := Config{HugeTLB: true, Cap: 8 * mib}
	with := func(f func(*System)) System { s := pool; f(&s); return s }
	neverSys := with(func(s *System) { s.ShmemTHP = "never" })
	for _, c := range []struct {
		name  string
		sys   System
		cfg   Config
		b     Backing
		size  int64
		used  int64
		mode  Mode
		dsize int64
		notes []string
	}{
		{"hugetlb fits, rounded up", pool, on, Memfd, 3*mib + 1, 0, HugeTLB, 4 * mib, nil},
		{"hugetlb off, thp advise", pool, Config{}, Memfd, 4 * mib, 0, THP, 4 * mib, nil},
		{"cap reached", pool, on, Memfd, 4 * mib, 6 * mib, THP, 4 * mib,
			[]string{"hugetlb: this process has taken 6291456 of its 8388608-byte cap, this object needs 4194304 more (raise the cap in KNEMESIS_HUGEPAGES=hugetlb:<bytes>)"}},
		{"no reserved pages, shmem never", with(func(s *System) { s.HugePagesFree, s.ShmemTHP = 0, "never" }), on, Memfd, 4 * mib, 0, Small, 4 * mib,
			[]string{"hugetlb: 0 free huge pages of 2 MiB, this object needs 2 (reserve them: echo 2 > /proc/sys/vm/nr_hugepages)",
				"thp: shmem_enabled is never (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled)"}},
		{"/dev/shm file: no hugetlb, mount without huge=", pool, on, DevShm, 4 * mib, 0, Small, 4 * mib,
			[]string{"hugetlb: only a memfd can have hugetlb pages, this object is a /dev/shm file",
				"thp: /dev/shm is mounted with huge=never (mount -o remount,huge=advise /dev/shm)"}},
		{"/dev/shm huge=within_size", with(func(s *System) { s.DevShmHuge = "within_size" }), Config{}, DevShm, 2 * mib, 0, THP, 2 * mib, nil},
		{"force overrides the mount", with(func(s *System) { s.ShmemTHP = "force" }), Config{}, DevShm, 2 * mib, 0, THP, 2 * mib, nil},
		{"deny", with(func(s *System) { s.ShmemTHP = "deny" }), Config{}, Memfd, 2 * mib, 0, Small, 2 * mib,
			[]string{"thp: shmem_enabled is deny (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled)"}},
		{"2 MiB size's own setting allows", with(func(s *System) { s.ShmemTHP, s.ShmemTHP2M = "never", "always" }), Config{}, Memfd, 2 * mib, 0, THP, 2 * mib, nil},
		{"2 MiB size's own setting refuses", with(func(s *System) { s.ShmemTHP2M = "never" }), Config{}, Memfd, 2 * mib, 0, Small, 2 * mib,
			[]string{"thp: hugepages-2048kB/shmem_enabled is never (echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled)"}},
		{"smaller than a huge page", neverSys, Config{}, Memfd, 64 << 10, 0, Small, 64 << 10,
			[]string{"thp: 65536 bytes is less than one 2 MiB page"}},
		{"anon: hugetlb fits", pool, on, Anon, 4 * mib, 0, HugeTLB, 4 * mib, nil},
		{"anon: madvise, whatever shmem says", with(func(s *System) { s.ShmemTHP, s.AnonTHP = "never", "madvise" }), Config{}, Anon, 4 * mib, 0, THP, 4 * mib, nil},
		{"anon: enabled never, no pool", with(func(s *System) { s.AnonTHP, s.HugePagesFree = "never", 0 }), on, Anon, 4 * mib, 0, Small, 4 * mib,
			[]string{"hugetlb: 0 free huge pages of 2 MiB, this object needs 2 (reserve them: echo 2 > /proc/sys/vm/nr_hugepages)",
				"thp: transparent_hugepage/enabled is never (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)"}},
		{"anon: 2 MiB size's own enabled refuses", with(func(s *System) { s.AnonTHP, s.AnonTHP2M = "always", "never" }), Config{}, Anon, 4 * mib, 0, Small, 4 * mib,
			[]string{"thp: hugepages-2048kB/enabled is never (echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled)"}},
		{"anon: no THP kernel", pool, Config{}, Anon, 4 * mib, 0, Small, 4 * mib,
			[]string{"thp: no /sys/kernel/mm/transparent_hugepage/enabled (a kernel without CONFIG_TRANSPARENT_HUGEPAGE)"}},
		{"no THP kernel, no hugetlb kernel", System{}, on, Memfd, 2 * mib, 0, Small, 2 * mib,
			[]string{"hugetlb: /proc/meminfo names no huge page size (a kernel without CONFIG_HUGETLBFS)",
				"thp: no /sys/kernel/mm/transparent_hugepage/shmem_enabled (a kernel without CONFIG_TRANSPARENT_HUGEPAGE)"}},
	} {
		d := Decide(c.sys, c.cfg, c.b, c.size, c.used)
		if d.Mode != c.mode || d.Size != c.dsize || !slices.Equal(d.Notes, c.notes) {
			t.Errorf("%s: got %v, %d bytes, notes %q; want %v, %d bytes, notes %q", c.name, d.Mode, d.Size, d.Notes, c.mode, c.dsize, c.notes)
		}
	}
}

// TestReadSystem reads a recorded machine: the bracketed choices, the
// /dev/shm mount's huge= option (the later mount wins) and the pool.
func TestReadSystem(t *testing.T) {
	fsys := fstest.MapFS{
		"sys/kernel/mm/transparent_hugepage/shmem_enabled":                  {Data: []byte("always within_size advise [never] deny force\n")},
		"sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled": {Data: []byte("always [inherit] within_size advise never\n")},
		"sys/kernel/mm/transparent_hugepage/enabled":                        {Data: []byte("always [madvise] never\n")},
		"sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled":       {Data: []byte("always [inherit] madvise never\n")},
		"proc/mounts":  {Data: []byte("tmpfs /dev/shm tmpfs rw,nosuid 0 0\ntmpfs /dev/shm tmpfs rw,size=1g,huge=advise 0 0\n")},
		"proc/meminfo": {Data: []byte("MemTotal: 1000 kB\nHugePages_Total: 16\nHugePages_Free: 12\nHugepagesize: 2048 kB\n")},
	}
	got := ReadSystem(fsys)
	want := System{ShmemTHP: "never", ShmemTHP2M: "inherit", AnonTHP: "madvise", AnonTHP2M: "inherit", DevShmHuge: "advise", HugePageSize: 2 * mib, HugePagesFree: 12}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := ReadSystem(fstest.MapFS{}); got != (System{}) {
		t.Fatalf("empty machine: got %+v", got)
	}
}

// TestParseConfig: the accepted and refused spellings.
func TestParseConfig(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Config
		err  string
	}{
		{"", Config{}, ""},
		{"off", Config{}, ""},
		{"hugetlb:512M", Config{HugeTLB: true, Cap: 512 * mib}, ""},
		{"hugetlb:0", Config{}, ""},
		{"yes", Config{}, `KNEMESIS_HUGEPAGES="yes": want hugetlb:<cap bytes> (such as hugetlb:512M) or off`},
	} {
		got, err := ParseConfig(c.in)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("%q: got %+v, %v; want %+v, %q", c.in, got, err, c.want, c.err)
		}
	}
}
