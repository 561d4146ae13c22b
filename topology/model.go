package topology

import (
	"bufio"
	"bytes"
	"os"
	"strings"
)

// CPUModel names the processor: the "model name" of /proc/cpuinfo, else the
// CPUID brand string, else "unknown".
func CPUModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(bytes.NewReader(b))
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	if info, err := DecodeCPUID(HostCPUID); err == nil || info.Brand != "" {
		return info.Brand
	}
	return "unknown"
}
