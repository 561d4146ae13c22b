package knem

import (
	"fmt"
	"strconv"
	"strings"
)

// DMAChannels returns how many DMA channels the driver splits one FlagDMA
// copy over now: every DMA_MEMCPY channel of the machine's engines, at most
// the module parameter dma_channels (0, its default, means all); 0 when
// there is none. A copy takes one channel per dma_split_min bytes (64 KiB
// by default), up to that many, so a short copy takes one. The count comes
// from the driver's statistics (the line "dma channels"), which also list
// the bytes each channel moved: the KNEM ABI itself is unchanged.
func DMAChannels() (int, error) {
	text, err := Stats()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(text, "\n") {
		v, ok := strings.CutPrefix(line, "dma channels: ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("knem: statistics line %q: not a channel count", line)
		}
		return n, nil
	}
	return 0, fmt.Errorf("knem: the driver's statistics have no \"dma channels\" line: a driver without several DMA channels (KNEM itself, or an older knem)")
}
