package pages

import (
	"bufio"
	"io/fs"
	"strconv"
	"strings"
)

// System is what the kernel says about huge pages for shared memory.
type System struct {
	// ShmemTHP is the selected value of shmem_enabled ("never", "advise",
	// "always", "within_size", "deny", "force"); "" when the file is
	// missing (a kernel without THP).
	ShmemTHP string
	// ShmemTHP2M is the 2 MiB size's own shmem_enabled (kernels with
	// multi-size THP): "inherit" defers to ShmemTHP; "" when absent.
	ShmemTHP2M string
	// AnonTHP is the selected value of transparent_hugepage/enabled
	// ("always", "madvise", "never"), which governs anonymous memory; ""
	// when the file is missing. AnonTHP2M is the 2 MiB size's own
	// hugepages-2048kB/enabled ("inherit" defers to AnonTHP).
	AnonTHP, AnonTHP2M string
	// DevShmHuge is the huge= option of the /dev/shm mount; "never" when
	// the mount has none, "" when /dev/shm is not a mount.
	DevShmHuge string
	// HugePageSize and HugePagesFree are /proc/meminfo's Hugepagesize (in
	// bytes) and HugePages_Free: the default hugetlb pool.
	HugePageSize  int64
	HugePagesFree int64
}

// ReadSystem reads the facts from fsys, rooted at / (os.DirFS("/") on the
// host, a fstest.MapFS in tests). A file it cannot read leaves its field
// at the zero value, which Decide takes as "not available".
func ReadSystem(fsys fs.FS) System {
	var s System
	s.ShmemTHP = selected(fsys, "sys/kernel/mm/transparent_hugepage/shmem_enabled")
	s.ShmemTHP2M = selected(fsys, "sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled")
	s.AnonTHP = selected(fsys, "sys/kernel/mm/transparent_hugepage/enabled")
	s.AnonTHP2M = selected(fsys, "sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled")
	s.DevShmHuge = devShmHuge(fsys)
	if b, err := fs.ReadFile(fsys, "proc/meminfo"); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			n, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Hugepagesize:":
				s.HugePageSize = n << 10
			case "HugePages_Free:":
				s.HugePagesFree = n
			}
		}
	}
	return s
}

// selected returns the bracketed word of a sysfs choice file
// ("always [madvise] never" gives "madvise").
func selected(fsys fs.FS, name string) string {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return ""
	}
	for _, w := range strings.Fields(string(b)) {
		if len(w) > 2 && w[0] == '[' && w[len(w)-1] == ']' {
			return w[1 : len(w)-1]
		}
	}
	return ""
}

// devShmHuge returns the huge= option of the last /dev/shm mount in
// /proc/mounts (the one that is visible).
func devShmHuge(fsys fs.FS) string {
	b, err := fs.ReadFile(fsys, "proc/mounts")
	if err != nil {
		return ""
	}
	opt := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] != "/dev/shm" || f[2] != "tmpfs" {
			continue
		}
		opt = "never"
		for _, o := range strings.Split(f[3], ",") {
			if v, ok := strings.CutPrefix(o, "huge="); ok {
				opt = v
			}
		}
	}
	return opt
}
