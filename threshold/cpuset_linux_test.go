package threshold

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAffinity: the mask matches the kernel's own account of it in
// /proc/self/status, and a pid that names no process is an error.
func TestAffinity(t *testing.T) {
	got, err := Affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var want CPUSet
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if want, err = ParseCPUList(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("Affinity(0) = %v, /proc/self/status says %v", got, want)
	}
	if _, err := Affinity(1 << 30); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Affinity of a pid that names no process: %v, want ESRCH", err)
	}
}
