package pipe_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/pipe"
)

// TestCappedPipe: a pipe-max-size below the minimum makes the backend
// unavailable with the sysctl that fixes it; between minimum and request
// the pipe is merely smaller.
func TestCappedPipe(t *testing.T) {
	capFile := filepath.Join(t.TempDir(), "pipe-max-size")
	for _, c := range []struct {
		cap    string
		fails  bool
		size   int
		capped bool
	}{{"16384", true, 0, true}, {"262144", false, 256 << 10, true}, {"4194304", false, 1 << 20, false}} {
		if err := os.WriteFile(capFile, []byte(c.cap+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := lmt.Config{Backends: []lmt.Settings{pipe.Settings{MaxSizePath: capFile}}}
		err := lmt.CheckConfig(pipe.Name, &cfg, lmt.Peer{Rank: 1})
		var u *lmt.Unavailable
		if c.fails != (err != nil) || c.fails && (!errors.As(err, &u) || !strings.Contains(u.Fix, "fs.pipe-max-size=1048576")) {
			t.Errorf("cap %s: Check = %v; want failure %v with the sysctl fix", c.cap, err, c.fails)
		}
		size, capped, _ := pipe.PipeSize(cfg)
		if !c.fails && (size != c.size || capped != c.capped) {
			t.Errorf("cap %s: PipeSize = %d, %v; want %d, %v", c.cap, size, capped, c.size, c.capped)
		}
	}
}
