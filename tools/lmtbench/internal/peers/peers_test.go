package peers

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each tool prints its throughput in units of its own: the conversions
// are checked on values whose answer is known by definition.
func TestConversions(t *testing.T) {
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"NetPIPE 8 Mbps of 2^20 bits is 2^20 B/s", NetPIPEMbps(8), 1 << 20},
		{"NetPIPE 1 Mbps is 131072 B/s", NetPIPEMbps(1), 131072},
		{"NetPIPE 76293.945 Mbps is 10 GB/s", NetPIPEMbps(1e10 * 8 / (1 << 20)), 1e10},
		{"ucx_perftest 1 MB/s of 2^20 bytes", UCXMBps(1), 1 << 20},
		{"ucx_perftest 9536.743 MB/s is 10 GB/s", UCXMBps(1e10 / (1 << 20)), 1e10},
		{"fabtests 1 MB/sec of 10^6 bytes", FabtestsMBps(1), 1e6},
		{"fabtests 10000 MB/sec is 10 GB/s", FabtestsMBps(10000), 1e10},
	} {
		if math.Abs(c.got-c.want) > 1e-9*c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestFabtestsSizeAndCount(t *testing.T) {
	for s, want := range map[string]float64{"8": 8, "64k": 65536, "1m": 1 << 20, "4m": 4 << 20, "1.5k": 1536, "2g": 2 << 30} {
		got, err := FabtestsSize(s)
		if err != nil || got != want {
			t.Errorf("FabtestsSize(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := FabtestsSize("x1m"); err == nil {
		t.Error("FabtestsSize(\"x1m\") = nil error")
	}
	for n, want := range map[int]string{100: "100", 999: "999", 1500: "1k", 12000: "12k", 2_500_000: "2m", 3_000_000_000: "3b"} {
		if got := FabtestsCount(n); got != want {
			t.Errorf("FabtestsCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// The parsers read output captured from real runs here
// (testdata/capture.sh). Each expected rate is the tool's throughput
// column converted by hand, and each case also checks it against the
// tool's own time column: a wrong unit (10^6 for 2^20) would be 5% off.
func TestParsers(t *testing.T) {
	for _, c := range []struct {
		file  string
		peer  string
		job   Job
		bps   float64 // expected bytes per second
		latUs float64 // the tool's own time per message, in µs
		tol   float64 // the printed precision of latUs, relative
	}{
		{"netpipe-ompi-8.out", "ompi", Job{Shape: NetPIPE, Size: 8, Iters: 20000}, 227.111427 * 131072, 0.27, 0.02},
		{"netpipe-ompi-copy-4m-stream.out", "ompi-copy", Job{Shape: Stream, Size: 4 << 20, Iters: 20}, 12755.065525 * 131072, 2508.81, 1e-5},
		{"netpipe-mpich-1m.out", "mpich", Job{Shape: NetPIPE, Size: 1 << 20, Iters: 50}, 13712.029031 * 131072, 583.43, 1e-5},
		{"ucx-posix-lat-8.out", "ucx-posix", Job{Shape: PingPong, Size: 8, Iters: 20000}, 11.18 * 1048576, 0.683, 0.002},
		{"ucx-sm-bw-4m.out", "ucx-sm", Job{Shape: Stream, Size: 4 << 20, Iters: 40}, 8181.21 * 1048576, 488.925, 1e-5},
		{"fi-shm-8.out", "ofi-shm", Job{Shape: PingPong, Size: 8, Iters: 12000}, 8.08e6, 0.99, 0.01},
		{"fi-shm-64k.out", "ofi-shm", Job{Shape: PingPong, Size: 65536, Iters: 1500}, 7271.81e6, 9.01, 0.001},
		{"fi-shm-1m.out", "ofi-shm", Job{Shape: PingPong, Size: 1 << 20, Iters: 100}, 8879.46e6, 118.09, 1e-4},
	} {
		t.Run(c.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			p := peer(t, c.peer)
			m, err := p.Parse(out, c.job)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(m.BytesPerSec-c.bps) > 1e-9*c.bps {
				t.Errorf("bytes/s %v, want %v", m.BytesPerSec, c.bps)
			}
			if math.Abs(m.LatencyUs()-c.latUs) > c.tol*c.latUs+0.005 {
				t.Errorf("latency %.4f µs from the rate, the tool printed %.4f", m.LatencyUs(), c.latUs)
			}
			if want := c.job.Iters * MessagesPerIteration(c.job.Shape); m.Messages != want || m.Iterations != c.job.Iters || m.Size != c.job.Size {
				t.Errorf("got %+v, want %d iterations, %d messages of %d bytes", m, c.job.Iters, want, c.job.Size)
			}
		})
	}
}

// A report that does not hold the sample is an error naming what is
// wrong, never a number.
func TestParseErrors(t *testing.T) {
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		peer string
		out  []byte
		job  Job
		want string
	}{
		{"ompi", read("netpipe-ompi-8.out"), Job{Shape: NetPIPE, Size: 16, Iters: 20000}, "NetPIPE wrote no line for 16 bytes"},
		{"ompi", []byte("       8 -nan   0.00000027\n"), Job{Shape: NetPIPE, Size: 8, Iters: 1}, `Mbps "-nan" is not a positive number`},
		{"ucx-posix", read("ucx-posix-lat-8.out"), Job{Shape: PingPong, Size: 8, Iters: 100}, "ran 20000 iterations, asked for 100"},
		{"ucx-posix", []byte("[1.2] UCX ERROR Destination is unreachable\n"), Job{Shape: PingPong, Size: 8, Iters: 1}, "printed no CSV result"},
		{"ofi-shm", read("fi-shm-8.out"), Job{Shape: PingPong, Size: 8, Iters: 100}, "sent 12k, asked for 100 iterations"},
		{"ofi-shm", read("fi-shm-1m.out"), Job{Shape: PingPong, Size: 4 << 20, Iters: 100}, "no result for 4194304 bytes"},
	} {
		_, err := peer(t, c.peer).Parse(c.out, c.job)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v, want one containing %q", c.peer, c.job, err, c.want)
		}
	}
}

func TestInvocationString(t *testing.T) {
	j := Job{Shape: Stream, Size: 4 << 20, Iters: 20, CPUs: []int{0, 1}, Root: true, Port: 40000, OutFile: "/tmp/x/report", ShmDir: "/dev/shm/y"}
	for name, want := range map[string]string{
		"ompi-copy":   "mpirun.openmpi --allow-run-as-root -np 2 --bind-to cpu-list:ordered --cpu-set 0,1 --mca btl_vader_backing_directory /dev/shm/y --mca btl self,vader --mca btl_vader_single_copy_mechanism none NPopenmpi -l 4194304 -u 4194304 -p 0 -n 20 -s -o /tmp/x/report",
		"mpich-posix": "mpiexec.mpich -n 2 -bind-to user:0,1 -genv UCX_TLS self,posix NPmpich2 -l 4194304 -u 4194304 -p 0 -n 20 -s -o /tmp/x/report",
		"ucx-sysv":    "UCX_TLS=sysv ucx_perftest -p 40000 -c 1 & UCX_TLS=sysv ucx_perftest 127.0.0.1 -p 40000 -c 0 -t tag_bw -s 4194304 -n 20 -w 12 -v",
	} {
		if got := peer(t, name).Invocation(j).String(); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	j.Shape, j.CPUs, j.Root = PingPong, nil, false
	want := "fi_pingpong -B 40000 -p shm -e rdm -I 20 -S 4194304 & fi_pingpong -P 40000 -p shm -e rdm -I 20 -S 4194304 127.0.0.1"
	if got := peer(t, "ofi-shm").Invocation(j).String(); got != want {
		t.Errorf("ofi-shm unpinned:\n got %s\nwant %s", got, want)
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote = %s", got)
	}
}

func TestLookupAndMissing(t *testing.T) {
	if _, err := Lookup("ompi,nope"); err == nil || !strings.Contains(err.Error(), `unknown peer "nope"`) {
		t.Errorf("Lookup: %v", err)
	}
	p := &Peer{Name: "x", Package: "pkg-x", Programs: []string{"no-such-program-lmtbench"}}
	err := p.Missing()
	if err == nil || err.Error() != "x: no-such-program-lmtbench not installed — apt-get install pkg-x" {
		t.Errorf("Missing: %v", err)
	}
}

func peer(t *testing.T, name string) *Peer {
	t.Helper()
	ps, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return ps[0]
}

func TestIterations(t *testing.T) {
	for _, c := range []struct {
		shape string
		size  int
		last  Measurement
		want  int
	}{
		// 15 ms at a guessed 2 µs + size / 2 GB/s per message.
		{PingPong, 8, Measurement{}, 3742},
		{Stream, 1 << 20, Measurement{}, 28},
		// 15 ms at 10 GB/s of 1 MiB messages, two per ping-pong iteration.
		{NetPIPE, 1 << 20, Measurement{BytesPerSec: 1e10}, 71},
		{NetPIPE, 64 << 20, Measurement{BytesPerSec: 1e9}, 10},
		{Stream, 8, Measurement{BytesPerSec: 1e9}, 1_000_000},
	} {
		if got := Iterations(c.shape, c.size, 15*time.Millisecond, c.last); got != c.want {
			t.Errorf("Iterations(%s, %d, %+v) = %d, want %d", c.shape, c.size, c.last, got, c.want)
		}
	}
}
