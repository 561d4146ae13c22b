package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

// firstKernel is the release `lmtbench --vm` boots: the first line of
// ci/kernels.txt.
func firstKernel(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../../ci/kernels.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	t.Fatal("ci/kernels.txt lists no kernel")
	return ""
}

// TestVMRunsKnemInTheGuest boots the first CI kernel with the knem module
// loaded and measures knem beside cma there: the host cannot load modules,
// so a knem row can only come from the guest, and a row exists only once the
// guest's ranks verified the pattern of every byte at that size.
func TestVMRunsKnemInTheGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("lacks long-tests: -short leaves no time to boot a QEMU guest (about a minute); make test runs it")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("lacks qemu: qemu-system-x86_64 is not installed")
	}
	rel := firstKernel(t)
	if _, err := os.Stat(filepath.Join("/usr/src/linux-headers-"+rel, "Makefile")); err != nil {
		if _, err := os.Stat(filepath.Join("/lib/modules", rel, "build", "Makefile")); err != nil {
			t.Skipf("lacks guest-kernel-headers: kernel headers for %s are not installed (linux-headers-%s)", rel, rel)
		}
	}
	start := time.Now()
	r := runEnv(t, []string{"KCI_BOOT_TIMEOUT=240"}, "--vm", "pingpong", "--backends", "knem,cma",
		"--sizes", "64K", "--iters", "3", "--samples", "1", "--json")
	t.Logf("--vm run took %v", time.Since(start).Round(time.Second))
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	notice, body, _ := strings.Cut(r.stdout, "\n")
	if notice != "--vm: timings below come from an emulated CPU (QEMU TCG); compare them only with each other, within this run" {
		t.Errorf("first line %q: want the emulated-timings notice", notice)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(body), &results); err != nil {
		t.Fatalf("guest output is not the JSON array: %v\n%s", err, body)
	}
	seen := map[string]bool{}
	for _, res := range results {
		seen[res.Backend] = true
		if res.Size != 64<<10 || res.Iterations != 3 || res.BytesPerSec <= 0 {
			t.Errorf("%s: size %d, %d iterations, %g B/s; want 65536, 3, > 0", res.Backend, res.Size, res.Iterations, res.BytesPerSec)
		}
		// knem and cma each copy the payload once, in the kernel.
		if k, ok := res.CopiesPerByte["kernel"]; ok && (k < 0.9 || k > 1.1) {
			t.Errorf("%s: %.2f kernel copies per byte; want 1", res.Backend, k)
		}
	}
	if !seen["knem"] || !seen["cma"] || len(results) != 2 {
		t.Errorf("rows for %v; want one knem and one cma", seen)
	}
}
