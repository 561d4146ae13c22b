package fastclock

const haveTSC = true

// readTSC returns the time-stamp counter (RDTSC).
func readTSC() uint64
