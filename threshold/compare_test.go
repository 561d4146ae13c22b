package threshold

import (
	"fmt"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	var points []Point
	for b, c := range curves {
		for size, gbps := range c {
			points = append(points, Point{Size: size, Backend: b, BytesPerSec: gbps * 1e9})
		}
	}
	// The formula's table for this machine: shm from 64 KiB on; at 16 MiB
	// CMA measured 2% faster, which Compare reports.
	table, err := Build(Env{Topology: mustSysfs(t, "epyc-kvm"), Placement: Placement{Sender: 0, Receiver: 1}})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := Compare(points, table)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%d:%s/%s:%.2f", v.Size, v.Chosen, v.Best, v.Ratio()))
	}
	want := "4096:eager/eager:1.00 16384:eager/eager:1.00 65536:shm/shm:1.00 262144:shm/shm:1.00 " +
		"1048576:shm/shm:1.00 4194304:shm/shm:1.00 16777216:shm/cma:0.98"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}

	table.Rules[0].Backend = Knem
	if _, err := Compare(points, table); err == nil || !strings.Contains(err.Error(), "picks knem at 65536 bytes") {
		t.Errorf("unmeasured choice: %v", err)
	}
}
