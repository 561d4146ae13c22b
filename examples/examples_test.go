// Package examples_test builds every example program and runs it, as a
// user would (go build, then the binary, which starts its own ranks), and
// compares all it prints with the example's want.txt.
package examples_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// examples are the programs run here; twonodes, a job of two nodes under
// mpirun, needs the build tags ofi and pmix and runs in mk/examples.mk.
var examples = []string{"hello", "ring", "halo", "allreduce", "rmanotify"}

const underMpirun = "twonodes"

// TestExamples: each example prints exactly its want.txt and exits 0.
func TestExamples(t *testing.T) {
	bin := t.TempDir()
	args := []string{"build", "-o", bin + "/"}
	for _, e := range examples {
		args = append(args, "./"+e)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	for _, e := range examples {
		t.Run(e, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(e, "want.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(bin, e))
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", e, err, stdout.Bytes(), stderr.Bytes())
			}
			if !bytes.Equal(stdout.Bytes(), want) {
				t.Errorf("%s printed:\n%s\nwant (%s/want.txt):\n%s\nstderr:\n%s", e, stdout.Bytes(), e, want, stderr.Bytes())
			}
		})
	}
}

// TestEveryExampleIsRun: every folder of examples/ is run, here or (the
// one under mpirun) by make, and has the output it is checked against.
func TestEveryExampleIsRun(t *testing.T) {
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		if !slices.Contains(examples, d.Name()) && d.Name() != underMpirun {
			t.Errorf("examples/%s is run by no test: add it to examples", d.Name())
		}
		if _, err := os.Stat(filepath.Join(d.Name(), "want.txt")); err != nil {
			t.Errorf("examples/%s has no expected output: %v", d.Name(), err)
		}
	}
}
