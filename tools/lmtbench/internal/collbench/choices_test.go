package collbench

import (
	"testing"

	"github.com/knemesis/knemesis/threshold"
)

func TestChoiceAt(t *testing.T) {
	tab := &threshold.Table{
		LMTMin: threshold.Threshold{Bytes: 16 << 10},
		Rules: []threshold.Rule{
			{From: 16 << 10, Backend: threshold.CMA},
			{From: 1 << 20, Backend: threshold.Knem, DMA: true},
		},
	}
	for _, c := range []struct {
		size, chooseAbove int
		want              string
	}{
		{8, 4095, "eager"},
		{8 << 10, 4095, "eager"},       // below the table's LMT switch
		{64 << 10, 4095, "cma"},        // the table's rule
		{64 << 10, 128 << 10, "eager"}, // the endpoint sends it eagerly whatever the table
		{4 << 20, 4095, "knem+dma"},
	} {
		if got := choiceAt(tab, c.size, c.chooseAbove); got != c.want {
			t.Errorf("%d B, eager up to %d B: %s, want %s", c.size, c.chooseAbove, got, c.want)
		}
	}
}
