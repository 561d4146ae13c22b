package threshold

import (
	"os"
	"testing"

	"github.com/knemesis/knemesis/topology"
)

// fixtures are the recorded sysfs trees of package topology.
const fixtures = "../topology/testdata/"

func mustSysfs(t testing.TB, fixture string) *topology.Topology {
	t.Helper()
	topo, err := topology.ReadSysfs(os.DirFS(fixtures + fixture))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// epycKVMCPUID is what CPUID says on each vCPU of the epyc-kvm machine
// (package topology decodes the recorded registers into these): private
// L1d, L1i and L2, one L3 for the two APIC IDs.
func epycKVMCPUID(topology.CPUSet) (map[int]topology.CPUIDInfo, error) {
	caches := []topology.CacheLeaf{
		{Level: 1, Type: topology.DataCache, Size: 32 << 10, LineSize: 64, MaxSharing: 1},
		{Level: 1, Type: topology.InstructionCache, Size: 32 << 10, LineSize: 64, MaxSharing: 1},
		{Level: 2, Type: topology.UnifiedCache, Size: 512 << 10, LineSize: 64, MaxSharing: 1},
		{Level: 3, Type: topology.UnifiedCache, Size: 32 << 20, LineSize: 64, MaxSharing: 2},
	}
	info := func(apic uint32) topology.CPUIDInfo {
		return topology.CPUIDInfo{Vendor: "AuthenticAMD", Brand: "AMD EPYC", APICID: apic, Leaf: 0x8000001d, Caches: caches}
	}
	return map[int]topology.CPUIDInfo{0: info(0), 1: info(1)}, nil
}
