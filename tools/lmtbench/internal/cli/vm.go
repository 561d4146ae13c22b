package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// vmNotice comes first in every --vm run: a TCG vCPU is an interpreter, so
// its microseconds say nothing about this machine's hardware; only ratios
// between the backends of one guest run mean something.
const vmNotice = "--vm: timings below come from an emulated CPU (QEMU TCG); compare them only with each other, within this run"

// vmHarness is the entry of ci/test-kernel.sh that boots one kernel with the
// modules loaded and runs a program instead of the tests.
const vmHarness = "ci/test-kernel.sh"

// exitStatus is a failure already reported (by the guest's lmtbench, on the
// streamed output): Main exits with its code and prints nothing more.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// checkVM refuses the flags whose effect would stay inside the guest.
func checkVM(o *options) error {
	if o.plot != "" {
		return usagef("--plot with --vm: the guest's files vanish when it powers off; use --json or --csv and plot on the host")
	}
	if o.command == "tune" {
		return usagef("tune with --vm: the tuning file would describe an emulated CPU and stay in the guest")
	}
	return nil
}

// runVM builds this program statically, boots the first kernel of
// ci/kernels.txt in QEMU with the knem modules loaded (through the ci/
// harness), runs the same command there without --vm and streams what it
// prints.
func runVM(o *options, args []string, stdout, stderr io.Writer) error {
	if err := checkVM(o); err != nil {
		return err
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return errors.New("--vm: qemu-system-x86_64 missing: apt-get install qemu-system-x86")
	}
	repo, err := findRepo()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, vmNotice)
	dir, err := os.MkdirTemp("", "lmtbench-vm")
	if err != nil {
		return fmt.Errorf("--vm: %v", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "lmtbench")
	build := exec.Command("go", "build", "-o", bin, "./tools/lmtbench")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("--vm: static build of lmtbench failed (%v): %s", err, firstLine(out))
	}
	harnessArgs := append([]string{filepath.Join(repo, vmHarness), "--run", bin, "--"}, guestArgs(o, args)...)
	cmd := exec.Command("bash", harnessArgs...)
	cmd.Dir = repo
	var harnessLog bytes.Buffer
	cmd.Stderr = &harnessLog
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("--vm: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("--vm: starting %s: %v", vmHarness, err)
	}
	var harnessErr string
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line := sc.Text()
		if why, ok := strings.CutPrefix(line, "vm-run: "); ok {
			harnessErr = why
			continue
		}
		fmt.Fprintln(stdout, line)
	}
	err = cmd.Wait()
	if harnessErr != "" {
		return fmt.Errorf("--vm: %s", harnessErr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitStatus(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("--vm: %s: %v: %s", vmHarness, err, firstLine(harnessLog.Bytes()))
	}
	return nil
}

// guestArgs are the command line minus --vm. Without --backends the guest
// measures knem beside the backends the host has, so that knem has something
// to be compared with in the same emulated run; without --placement-probe it
// skips the probe, which the guest does not have; without --progress it
// draws no progress bar.
func guestArgs(o *options, args []string) []string {
	var out []string
	backends, probe, progress := false, false, false
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "vm" {
			continue
		}
		backends = backends || strings.HasPrefix(a, "-") && name == "backends"
		probe = probe || strings.HasPrefix(a, "-") && name == "placement-probe"
		progress = progress || strings.HasPrefix(a, "-") && name == "progress"
		out = append(out, a)
	}
	if !backends && o.command != "latency" {
		out = append(out, "--backends", "knem,cma,vmsplice,shm,pipe")
	}
	if !probe {
		out = append(out, "--placement-probe", "none")
	}
	// The guest's console is a terminal: its redraws would garble the
	// streamed table.
	if !progress {
		out = append(out, "--progress=false")
	}
	return out
}

// findRepo is the knemesis clone that holds the harness: $KNEMESIS_REPO, or
// the nearest directory above the working directory that has it.
func findRepo() (string, error) {
	if r := os.Getenv("KNEMESIS_REPO"); r != "" {
		if _, err := os.Stat(filepath.Join(r, vmHarness)); err != nil {
			return "", fmt.Errorf("--vm: KNEMESIS_REPO=%s has no %s", r, vmHarness)
		}
		return r, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("--vm: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, vmHarness)); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("--vm: no %s above %s: run from the knemesis clone or set KNEMESIS_REPO", vmHarness, wd)
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
