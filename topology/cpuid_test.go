package topology

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

type leafKey struct{ leaf, sub uint32 }

// recording replays CPUID answers; leaves not recorded answer zeros, as
// reserved leaves do.
type recording map[leafKey]Regs

func (r recording) cpuid(leaf, sub uint32) Regs { return r[leafKey{leaf, sub}] }

func (r recording) with(extra recording) recording {
	out := recording{}
	for k, v := range r {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// epycKVM is CPUID as recorded on this project's machine (2-vCPU AMD EPYC
// KVM guest, family 0x19) on cpu0; cpu1 differs in its APIC IDs only.
var epycKVM = recording{
	{0x0, 0}:        {0x00000010, 0x68747541, 0x444d4163, 0x69746e65},
	{0x1, 0}:        {0x00a00f11, 0x00020800, 0xfffa3203, 0x178bfbff},
	{0xb, 0}:        {0x00000000, 0x00000001, 0x00000100, 0x00000000},
	{0xb, 1}:        {0x00000005, 0x00000002, 0x00000201, 0x00000000},
	{0x80000000, 0}: {0x80000022, 0x68747541, 0x444d4163, 0x69746e65},
	{0x80000001, 0}: {0x00a00f11, 0x40000000, 0x004003f3, 0x2fd3fbff},
	{0x80000002, 0}: {0x20444d41, 0x43595045, 0x00000000, 0x00000000},
	{0x80000005, 0}: {0xff40ff40, 0xff40ff40, 0x20080140, 0x20080140},
	{0x80000006, 0}: {0x48002200, 0x68004200, 0x02006140, 0x08009140},
	{0x8000001d, 0}: {0x00000121, 0x01c0003f, 0x0000003f, 0x00000000},
	{0x8000001d, 1}: {0x00000122, 0x01c0003f, 0x0000003f, 0x00000000},
	{0x8000001d, 2}: {0x00000143, 0x01c0003f, 0x000003ff, 0x00000002},
	{0x8000001d, 3}: {0x00004163, 0x03c0003f, 0x00007fff, 0x00000001},
}

var epycKVMcpu1 = epycKVM.with(recording{
	{0x1, 0}: {0x00a00f11, 0x01020800, 0xfffa3203, 0x178bfbff},
	{0xb, 0}: {0x00000000, 0x00000001, 0x00000100, 0x00000001},
	{0xb, 1}: {0x00000005, 0x00000002, 0x00000201, 0x00000001},
})

func brandLeaves(s string) recording {
	b := make([]byte, 48)
	copy(b, s)
	r := recording{}
	for i := range 3 {
		w := func(j int) uint32 { return binary.LittleEndian.Uint32(b[16*i+4*j:]) }
		r[leafKey{0x80000002 + uint32(i), 0}] = Regs{w(0), w(1), w(2), w(3)}
	}
	return r
}

// xeonE5345 builds CPUID of the paper's Xeon E5345 from the documented
// leaf 4 encoding: max basic leaf 0xA (no leaf 0xB), 32 KiB 8-way L1d and
// L1i with 64 sets, 4 MiB 16-way L2 with 4096 sets shared by 2 threads
// (EAX[25:14] = 1), 4 cores per package (EAX[31:26] = 3).
func xeonE5345(apicID uint32) recording {
	r := recording{
		{0x0, 0}:        {0x0000000a, 0x756e6547, 0x6c65746e, 0x49656e69},
		{0x1, 0}:        {0x000006f7, apicID << 24, 0x0004e3bd, 0xbfebfbff},
		{0x4, 0}:        {0x0c000121, 0x01c0003f, 0x0000003f, 0},
		{0x4, 1}:        {0x0c000122, 0x01c0003f, 0x0000003f, 0},
		{0x4, 2}:        {0x0c004143, 0x03c0003f, 0x00000fff, 0},
		{0x80000000, 0}: {0x80000008, 0, 0, 0},
	}
	return r.with(brandLeaves("Intel(R) Xeon(R) CPU           E5345  @ 2.33GHz"))
}

// xeonAPIC numbers the E5345 as Linux did: cpu n and n+4 are the two cores
// behind one L2, so their APIC IDs differ in bit 0 only.
func xeonAPIC(cpu int) uint32 { return uint32(2*(cpu%4) + cpu/4) }

func TestDecodeCacheLeaf(t *testing.T) {
	tests := []struct {
		name string
		regs Regs
		want CacheLeaf
	}{
		{"E5345 L2", Regs{0x0c004143, 0x03c0003f, 0x00000fff, 0}, CacheLeaf{Level: 2, Type: UnifiedCache, Size: 4 << 20, LineSize: 64, MaxSharing: 2}},
		{"E5345 L1i", Regs{0x0c000122, 0x01c0003f, 0x0000003f, 0}, CacheLeaf{Level: 1, Type: InstructionCache, Size: 32 << 10, LineSize: 64, MaxSharing: 1}},
		{"EPYC L3", Regs{0x00004163, 0x03c0003f, 0x00007fff, 1}, CacheLeaf{Level: 3, Type: UnifiedCache, Size: 32 << 20, LineSize: 64, MaxSharing: 2}},
		{"EPYC L2", Regs{0x00000143, 0x01c0003f, 0x000003ff, 2}, CacheLeaf{Level: 2, Type: UnifiedCache, Size: 512 << 10, LineSize: 64, MaxSharing: 1}},
		// Zen 2 CCX L3: 16 MiB, 16-way, 16384 sets, 8 threads (EAX[25:14]=7).
		{"Zen2 L3", Regs{0x0001c163, 0x03c0003f, 0x00003fff, 1}, CacheLeaf{Level: 3, Type: UnifiedCache, Size: 16 << 20, LineSize: 64, MaxSharing: 8}},
	}
	for _, tt := range tests {
		got, ok := DecodeCacheLeaf(tt.regs)
		if !ok || got != tt.want {
			t.Errorf("%s: DecodeCacheLeaf(%#x) = %+v, %v; want %+v", tt.name, tt.regs, got, ok, tt.want)
		}
	}
	if _, ok := DecodeCacheLeaf(Regs{}); ok {
		t.Error("type 0 (end of list) decoded as a cache")
	}
}

func TestDecodeCPUIDRecordedEPYC(t *testing.T) {
	info, err := DecodeCPUID(epycKVMcpu1.cpuid)
	if err != nil {
		t.Fatal(err)
	}
	if info.Vendor != "AuthenticAMD" || info.Brand != "AMD EPYC" || info.APICID != 1 || info.Leaf != 0x8000001d {
		t.Errorf("got vendor %q brand %q apic %d leaf %#x", info.Vendor, info.Brand, info.APICID, info.Leaf)
	}
	if len(info.Caches) != 4 {
		t.Fatalf("got %d caches, want 4: %+v", len(info.Caches), info.Caches)
	}
	// AMD leaf 4 is reserved (zeros here): decoding must not have used it.
	topo, err := TopologyFromCPUID(map[int]CPUIDInfo{0: mustDecode(t, epycKVM), 1: info})
	if err != nil {
		t.Fatal(err)
	}
	assertSameTopology(t, topo, mustSysfs(t, "epyc-kvm"), SourceCPUID)
}

func TestDecodeCPUIDXeonMatchesSysfs(t *testing.T) {
	per := map[int]CPUIDInfo{}
	for cpu := range 8 {
		per[cpu] = mustDecode(t, xeonE5345(xeonAPIC(cpu)))
	}
	if per[3].Brand != "Intel(R) Xeon(R) CPU           E5345  @ 2.33GHz" || per[3].Leaf != 4 {
		t.Errorf("brand %q leaf %#x", per[3].Brand, per[3].Leaf)
	}
	topo, err := TopologyFromCPUID(per)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTopology(t, topo, mustSysfs(t, "xeon-e5345"), SourceCPUID)
}

func TestDecodeCPUIDLegacyAMD(t *testing.T) {
	// No TOPOEXT: sizes from 0x80000005/6, sharing assumed. On this Zen
	// part the legacy L3 field (EDX[31:18] × 512 KiB) counts the whole
	// package: 512 × 512 KiB = 256 MiB, against 32 MiB per CCX in 0x8000001D.
	r := epycKVM.with(recording{{0x80000001, 0}: {0x00a00f11, 0x40000000, 0x000003f3, 0x2fd3fbff}})
	info := mustDecode(t, r)
	if info.Leaf != 0x80000006 {
		t.Fatalf("leaf %#x, want legacy 0x80000006", info.Leaf)
	}
	want := []CacheLeaf{
		{1, DataCache, 32 << 10, 64, 1}, {1, InstructionCache, 32 << 10, 64, 1},
		{2, UnifiedCache, 512 << 10, 64, 1}, {3, UnifiedCache, 256 << 20, 64, 0},
	}
	for i, w := range want {
		if info.Caches[i] != w {
			t.Errorf("cache %d = %+v, want %+v", i, info.Caches[i], w)
		}
	}
	info1 := mustDecode(t, epycKVMcpu1.with(recording{{0x80000001, 0}: {0x00a00f11, 0x40000000, 0x000003f3, 0x2fd3fbff}}))
	topo, err := TopologyFromCPUID(map[int]CPUIDInfo{0: info, 1: info1})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := topo.SharedCache(0, 1); !ok || c.Level != 3 || len(topo.Notes) != 1 {
		t.Errorf("legacy L3 not shared by all: %v %v notes %q", c, ok, topo.Notes)
	}
}

func TestDecodeCPUIDNoCacheLeaves(t *testing.T) {
	// An Intel VM whose hypervisor zeroes leaf 4.
	r := xeonE5345(0)
	delete(r, leafKey{4, 0})
	_, err := DecodeCPUID(r.cpuid)
	if !errors.Is(err, ErrNoCacheInfo) {
		t.Fatalf("err = %v, want ErrNoCacheInfo", err)
	}
	if _, err := TopologyFromCPUID(nil); !errors.Is(err, ErrNoCacheInfo) {
		t.Fatalf("empty: err = %v", err)
	}
}

func TestCPUIDGroupSizeMismatch(t *testing.T) {
	a, b := mustDecode(t, epycKVM), mustDecode(t, epycKVMcpu1)
	b.Caches[3].Size = 16 << 20
	if _, err := TopologyFromCPUID(map[int]CPUIDInfo{0: a, 1: b}); err == nil {
		t.Fatal("two sizes for one shared L3 accepted")
	}
}

// TestHostCPUID reads this machine's CPUID on every CPU and, where the
// kernel also describes the caches in sysfs, checks that both agree.
func TestHostCPUID(t *testing.T) {
	sys, err := ReadSysfs(os.DirFS(SysfsCPURoot))
	if err != nil {
		t.Skipf("lacks sysfs-cache-topology: host sysfs has no cache topology to compare with: %v", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	per, err := ReadCPUID(sys.CPUs)
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != before {
		t.Errorf("ReadCPUID changed the caller's affinity: %v → %v (%v)", before.Count(), after.Count(), err)
	}
	if errors.Is(err, ErrNoCPUID) {
		t.Skip("lacks cpuid: CPUID instruction not available on this architecture")
	}
	if err != nil {
		t.Fatal(err)
	}
	topo, err := TopologyFromCPUID(per)
	if err != nil {
		t.Fatal(err)
	}
	for cpu, info := range per {
		t.Logf("cpu%d: %s %q apic %d leaf %#x", cpu, info.Vendor, info.Brand, info.APICID, info.Leaf)
	}
	for _, c := range topo.Caches {
		t.Logf("cpuid: %s", c)
	}
	assertSameTopology(t, topo, sys, SourceCPUID)
}

func mustDecode(t *testing.T, r recording) CPUIDInfo {
	t.Helper()
	info, err := DecodeCPUID(r.cpuid)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func mustSysfs(t *testing.T, fixture string) *Topology {
	t.Helper()
	topo, err := ReadSysfs(os.DirFS("testdata/" + fixture))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// assertSameTopology compares caches but for their source.
func assertSameTopology(t *testing.T, got, want *Topology, src Source) {
	t.Helper()
	if !got.CPUs.Equal(want.CPUs) {
		t.Errorf("cpus %s, want %s", got.CPUs, want.CPUs)
	}
	if len(got.Caches) != len(want.Caches) {
		t.Fatalf("%d caches, want %d:\n got %v\nwant %v", len(got.Caches), len(want.Caches), got.Caches, want.Caches)
	}
	for i, c := range got.Caches {
		w := want.Caches[i]
		if c.Source != src {
			t.Errorf("%s: source %s, want %s", c, c.Source, src)
		}
		if c.Level != w.Level || c.Type != w.Type || c.Size != w.Size || c.LineSize != w.LineSize || !c.CPUs.Equal(w.CPUs) {
			t.Errorf("cache %d: got %s, want %s", i, c, w)
		}
	}
}

func TestCPUIDHybridGroupsDoNotCollide(t *testing.T) {
	// A P-core (APIC 2, private 1.25 MiB L2) and four E-cores (APIC 16-19,
	// 2 MiB L2 shared by the cluster, EAX[25:14] = 7): 2>>0 and 16>>3 are
	// both 2, yet the caches differ.
	pcore := CPUIDInfo{APICID: 2, Caches: []CacheLeaf{{Level: 2, Type: UnifiedCache, Size: 1280 << 10, LineSize: 64, MaxSharing: 1}}}
	per := map[int]CPUIDInfo{0: pcore}
	for i := range 4 {
		per[1+i] = CPUIDInfo{APICID: uint32(16 + i), Caches: []CacheLeaf{{Level: 2, Type: UnifiedCache, Size: 2 << 20, LineSize: 64, MaxSharing: 8}}}
	}
	topo, err := TopologyFromCPUID(per)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Caches) != 2 || topo.Caches[0].CPUs.String() != "0" || topo.Caches[1].CPUs.String() != "1-4" {
		t.Errorf("hybrid L2s: %v", topo.Caches)
	}
}

func TestDecodeCPUIDImplausibleLeaf(t *testing.T) {
	// All size fields at their maximum: 4096 × 1024 × 1024 × 2^32 bytes
	// would wrap an int64.
	r := epycKVM.with(recording{{0x8000001d, 1}: {0x00000122, 0xffffffff, 0xffffffff, 0}})
	_, err := DecodeCPUID(r.cpuid)
	if err == nil || !strings.Contains(err.Error(), "subleaf 1") {
		t.Fatalf("err = %v, want the implausible subleaf named", err)
	}
	r = epycKVM.with(recording{{0x8000001d, 2}: {0x00000103, 0x01c0003f, 0x3ff, 0}}) // level 0
	if _, err := DecodeCPUID(r.cpuid); err == nil {
		t.Fatal("a level-0 cache accepted")
	}
}

func FuzzDecodeCacheLeaf(f *testing.F) {
	f.Add(uint32(0x0c004143), uint32(0x03c0003f), uint32(0xfff))
	f.Add(uint32(0x00004163), uint32(0xffffffff), uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, eax, ebx, ecx uint32) {
		c, ok := DecodeCacheLeaf(Regs{eax, ebx, ecx, 0})
		if ok && (c.Size < 0 || c.Size > maxCacheSize || c.MaxSharing < 1 || c.LineSize < 1) {
			t.Fatalf("DecodeCacheLeaf(%#x %#x %#x) = %+v", eax, ebx, ecx, c)
		}
	})
}
