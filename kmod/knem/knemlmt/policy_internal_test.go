package knemlmt

import "testing"

// TestDefaultDMAPolicy: without Policy.DMA, a copy goes to the engine only
// above DMA_min, which is divided by the copies already in flight (§4.4),
// and never when the driver has no channel or the topology gave no DMA_min.
func TestDefaultDMAPolicy(t *testing.T) {
	const dmaMin = 8 << 20
	cases := []struct {
		name     string
		dma      bool
		dmaMin   int64
		inflight int
		policy   func(int) bool
		n        int
		want     bool
	}{
		{"at DMA_min stays on the CPU", true, dmaMin, 0, nil, dmaMin, false},
		{"above DMA_min goes to the engine", true, dmaMin, 0, nil, dmaMin + 1, true},
		{"one copy in flight halves DMA_min", true, dmaMin, 1, nil, dmaMin/2 + 1, true},
		{"one copy in flight, below the halved DMA_min", true, dmaMin, 1, nil, dmaMin / 2, false},
		{"no channel", false, dmaMin, 0, nil, 64 << 20, false},
		{"unknown topology", true, 0, 0, nil, 64 << 20, false},
		{"explicit policy wins", true, dmaMin, 0, func(int) bool { return true }, 4096, true},
		{"explicit policy, no channel", false, dmaMin, 0, func(int) bool { return true }, 4096, false},
	}
	for _, c := range cases {
		b := &backend{dma: c.dma, dmaMin: c.dmaMin, inflight: c.inflight, policy: Policy{DMA: c.policy}}
		if got := b.useDMA(c.n); got != c.want {
			t.Errorf("%s: useDMA(%d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
}

// TestMachineDMAMin: on this machine the formula gives a positive
// threshold no larger than half the last-level cache.
func TestMachineDMAMin(t *testing.T) {
	got := machineDMAMin()
	if got <= 0 {
		t.Fatalf("machineDMAMin() = %d: the topology (sysfs or CPUID) gave no cache", got)
	}
	if got > 1<<30 {
		t.Fatalf("machineDMAMin() = %d: larger than any cache", got)
	}
}
