package attach_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// envEcho turns a re-executed test binary into a rank of the echo job of
// BenchmarkPairInBigJobLMT: "job rank procs".
const envEcho = "KNEMESIS_ATTACH_BENCH_ECHO"

const stopTag = nemesis.MaxTag - 1

func TestMain(m *testing.M) {
	if spec := os.Getenv(envEcho); spec != "" {
		if err := echoRank(spec); err != nil {
			fmt.Fprintln(os.Stderr, "echo rank:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echoRank: rank 1 sends back whatever rank 0 sends; the others block in
// a receive until the end, with the LMT attached as in any job.
func echoRank(spec string) error {
	f := strings.Fields(spec)
	if len(f) != 3 {
		return fmt.Errorf("spec %q, want \"job rank procs\"", spec)
	}
	rank, err1 := strconv.Atoi(f[1])
	procs, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("spec %q: %v %v", spec, err1, err2)
	}
	ep, err := nemesis.Join(f[0], rank, procs, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	l, err := attach.Attach(ep, attach.Options{})
	if err != nil {
		return err
	}
	defer l.Close()
	if rank > 1 {
		_, err := ep.Recv(0, stopTag, nil)
		return err
	}
	buf := make([]byte, 1<<20)
	for {
		st, err := ep.Recv(0, nemesis.AnyTag, buf)
		if err != nil {
			return err
		}
		if st.Tag == stopTag {
			return nil
		}
		if err := ep.Send(0, st.Tag, buf[:st.Count]); err != nil {
			return err
		}
	}
}

// startJob starts a job of procs ranks with the LMT attached, this process
// rank 0, rank 1 an echo, the others blocked in a receive.
func startJob(b *testing.B, procs int) *nemesis.Endpoint {
	job := launch.NewJobName()
	var cmds []*exec.Cmd
	for rank := 1; rank < procs; rank++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", envEcho, job, rank, procs))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	ep, err := nemesis.Join(job, 0, procs, nil)
	if err != nil {
		b.Fatal(err)
	}
	l, err := attach.Attach(ep, attach.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for r := 1; r < procs; r++ {
			ep.Send(r, stopTag, nil)
		}
		l.Close()
		ep.Close()
		for _, c := range cmds {
			if err := c.Wait(); err != nil {
				b.Errorf("rank of the echo job: %v", err)
			}
		}
	})
	return ep
}

// BenchmarkPairInBigJobLMT is nemesis's BenchmarkPairInBigJob with the LMT
// attached, as in any real job: one pair's ping-pong of 8 B (eager) and
// 1 MiB (through the LMT's automatic choice), in a job of 2 and in a job
// of 64 whose 62 other ranks are blocked in a receive, measured once all
// of them sleep. After each size it prints both sides and the ratio
// (the 64-rank job's time over the 2-rank job's; the aim is at most 1.1):
//
//	go test -run '^$' -bench PairInBigJobLMT -benchtime 2s ./attach/
func BenchmarkPairInBigJobLMT(b *testing.B) {
	for _, size := range []int{8, 1 << 20} {
		var oneway [2]float64 // µs, by job: 2 ranks, 64 ranks
		for i, procs := range []int{2, 64} {
			b.Run(fmt.Sprintf("procs=%d/%d", procs, size), func(b *testing.B) {
				ep := startJob(b, procs)
				launchtest.WaitChildrenAsleep(b, time.Minute)
				msg, buf := make([]byte, size), make([]byte, size)
				roundTrip := func() {
					if err := ep.Send(1, 1, msg); err != nil {
						b.Fatal(err)
					}
					if _, err := ep.Recv(1, 1, buf); err != nil {
						b.Fatal(err)
					}
				}
				for range 100 {
					roundTrip()
				}
				b.SetBytes(int64(2 * size))
				for b.Loop() {
					roundTrip()
				}
				oneway[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 2000
				b.ReportMetric(oneway[i], "µs/oneway")
			})
		}
		if oneway[0] > 0 && oneway[1] > 0 {
			mbs := func(us float64) float64 { return float64(size) / us }
			fmt.Printf("pair with the LMT attached, %d B: 2-rank job %.3f µs one way (%.0f MB/s), 64-rank job %.3f µs (%.0f MB/s): ratio %.2f\n",
				size, oneway[0], mbs(oneway[0]), oneway[1], mbs(oneway[1]), oneway[1]/oneway[0])
		}
	}
}
