//go:build ofi && pmix

package ofinet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
	"github.com/knemesis/knemesis/netmod/pmix"
)

const envMpirun = "KNEMESIS_OFINET_MPIRUN"

// TestUnderMpirun runs the traffic scenario (any-source over both paths,
// order, 0 B..64 MiB) in four ranks started by Open MPI's mpirun, joined
// through PMIx by Join, the node ids overridden to two nodes of two ranks.
func TestUnderMpirun(t *testing.T) {
	if os.Getenv(envMpirun) != "" {
		if err := launchedRank(); err != nil {
			t.Fatal(err)
		}
		return
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("lacks mpirun: mpirun (Debian package openmpi-bin) is not installed: no PMIx launcher to test under")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "--allow-run-as-root", "-np", fmt.Sprint(jobSize),
		"-x", envMpirun+"=1", "-x", pmix.EnvNodeMap+"=0,0,1,1",
		os.Args[0], "-test.run=^TestUnderMpirun$", "-test.count=1", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	checkLaunched(t, "mpirun", out)
}

// TestUnderSrun is TestUnderMpirun with Slurm's srun as the launcher and
// PMIx server (--mpi=pmix), in a private one-node cluster that
// ci/slurm-local.sh starts for it.
func TestUnderSrun(t *testing.T) {
	if os.Getenv(envMpirun) != "" {
		if err := launchedRank(); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, tool := range []string{"srun", "slurmctld", "slurmd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("lacks slurm: %s is not installed (Debian packages slurm-client, slurmctld, slurmd): no Slurm to launch under", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../ci/slurm-local.sh", "srun", "--mpi=pmix", "--export=ALL", "-n", fmt.Sprint(jobSize),
		os.Args[0], "-test.run=^TestUnderSrun$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envMpirun+"=1", pmix.EnvNodeMap+"=0,0,1,1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("srun: %v\n%s", err, out)
	}
	checkLaunched(t, "srun", out)
}

// checkLaunched checks that every rank of a launched job reported its
// traffic ok, with its node and path.
func checkLaunched(t *testing.T, launcher string, out []byte) {
	t.Helper()
	for r := range jobSize {
		want := fmt.Sprintf("rank %d of %d, node %d, reaches rank %d by net ofi tcp;ofi_rxm: traffic ok", r, jobSize, nodeOf[r], (r+2)%jobSize)
		if !strings.Contains(string(out), want) {
			t.Fatalf("no %q in the output of %s:\n%s", want, launcher, out)
		}
	}
}

// launchedRank is one rank of a job that mpirun or srun started: it joins
// through PMIx and runs the traffic scenario.
func launchedRank() error {
	// The launcher's PMIx server names the rank before Join does, so that
	// the big messages are made before Join, as netnsChild makes them.
	rank, err := strconv.Atoi(os.Getenv("PMIX_RANK"))
	if err != nil {
		return fmt.Errorf("PMIX_RANK %q: %w", os.Getenv("PMIX_RANK"), err)
	}
	prepare(rank)
	ep, c, err := Join(Config{Config: ofi.Config{Provider: provider, Node: "127.0.0.1"}}, &nemesis.Options{})
	if err != nil {
		return err
	}
	defer c.Finalize()
	defer ep.Close()
	if ep.Size() != jobSize || c.Node() != nodeOf[ep.Rank()] {
		return fmt.Errorf("rank %d of %d on node %d; want a job of %d, node %d", ep.Rank(), ep.Size(), c.Node(), jobSize, nodeOf[ep.Rank()])
	}
	if err := withLMT(ep, traffic); err != nil {
		return err
	}
	other := (ep.Rank() + 2) % jobSize
	fmt.Printf("rank %d of %d, node %d, reaches rank %d by %s: traffic ok\n", ep.Rank(), ep.Size(), c.Node(), other, ep.Path(other))
	return nil
}
