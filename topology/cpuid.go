package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/knemesis/knemesis/internal/bytesize"
)

// Regs holds the four registers a CPUID instruction returns.
type Regs struct{ EAX, EBX, ECX, EDX uint32 }

// CPUIDFunc executes CPUID (or replays a recording of it) on one CPU.
type CPUIDFunc func(leaf, subleaf uint32) Regs

// CPUID leaves this package reads.
const (
	leafVendor      = 0x0
	leafFeatures    = 0x1
	leafIntelCache  = 0x4 // deterministic cache parameters (Intel)
	leafTopology    = 0xB // extended topology: x2APIC id
	leafExtMax      = 0x80000000
	leafExtFeatures = 0x80000001
	leafBrand       = 0x80000002 // 0x80000002..4: brand string
	leafAMDL1       = 0x80000005
	leafAMDL2L3     = 0x80000006
	leafAMDCache    = 0x8000001D // cache topology (AMD, needs TOPOEXT)
	amdTopoExtBit   = 1 << 22    // 0x80000001 ECX: TOPOEXT
	maxCacheLeaves  = 16         // subleaves scanned before giving up
	maxCacheSize    = 1 << 40    // larger is corrupt (a leaf, a sysfs file), not a cache
)

// CacheLeaf is one cache as CPUID describes it: geometry, and how many
// logical processors (APIC IDs) may share it.
type CacheLeaf struct {
	Level    int
	Type     CacheType
	Size     int64
	LineSize int
	// MaxSharing is the number of APIC IDs reserved for the logical
	// processors sharing this cache (EAX[25:14]+1). The sharing group of a
	// CPU is its APIC ID shifted right by ceil(log2(MaxSharing)), which is
	// how Linux computes shared_cpu_list. 0 means "every CPU" (legacy AMD
	// leaves do not say).
	MaxSharing int
}

// DecodeCacheLeaf decodes one subleaf of CPUID leaf 4 (Intel) or 0x8000001D
// (AMD), which share their layout: EAX[4:0] type, EAX[7:5] level,
// EAX[25:14] sharing-1, EBX[11:0] line-1, EBX[21:12] partitions-1,
// EBX[31:22] ways-1, ECX sets-1. ok is false for the null type that ends the
// list.
func DecodeCacheLeaf(r Regs) (c CacheLeaf, ok bool) {
	switch r.EAX & 0x1f {
	case 1:
		c.Type = DataCache
	case 2:
		c.Type = InstructionCache
	case 3:
		c.Type = UnifiedCache
	default:
		return c, false
	}
	c.Level = int(r.EAX >> 5 & 0x7)
	c.MaxSharing = int(r.EAX>>14&0xfff) + 1
	line := uint64(r.EBX&0xfff) + 1
	partitions := uint64(r.EBX>>12&0x3ff) + 1
	ways := uint64(r.EBX>>22) + 1
	sets := uint64(r.ECX) + 1
	c.LineSize = int(line)
	// The fields allow up to 2^64 bytes; a hypervisor's garbage must not
	// wrap into a plausible size. Size 0 marks the leaf implausible.
	if hi, size := bits.Mul64(line*partitions*ways, sets); hi == 0 && size <= maxCacheSize {
		c.Size = int64(size)
	}
	return c, true
}

// CPUIDInfo is what one CPU's CPUID says about itself.
type CPUIDInfo struct {
	Vendor string // "GenuineIntel", "AuthenticAMD", ...
	Brand  string // model name, "" when the CPU has no brand leaves
	APICID uint32 // x2APIC ID when leaf 0xB exists, else the initial APIC ID
	Leaf   uint32 // the leaf the caches came from (4, 0x8000001D, 0x80000006)
	Caches []CacheLeaf
}

// DecodeCPUID interprets the answers of one CPU. It is a pure function of
// q, so recorded register values test it.
func DecodeCPUID(q CPUIDFunc) (CPUIDInfo, error) {
	var info CPUIDInfo
	r := q(leafVendor, 0)
	maxLeaf := r.EAX
	info.Vendor = regString(r.EBX, r.EDX, r.ECX)
	if maxLeaf < leafFeatures {
		return info, fmt.Errorf("cpuid: max basic leaf %#x has no APIC ID: %w", maxLeaf, ErrNoCacheInfo)
	}
	info.APICID = q(leafFeatures, 0).EBX >> 24
	if maxLeaf >= leafTopology {
		if t := q(leafTopology, 0); t.EBX&0xffff != 0 {
			info.APICID = t.EDX
		}
	}
	maxExt := q(leafExtMax, 0).EAX
	if maxExt >= leafBrand+2 {
		var b []uint32
		for l := uint32(leafBrand); l <= leafBrand+2; l++ {
			r := q(l, 0)
			b = append(b, r.EAX, r.EBX, r.ECX, r.EDX)
		}
		info.Brand = strings.TrimSpace(strings.TrimRight(regString(b...), "\x00"))
	}
	amd := info.Vendor == "AuthenticAMD" || info.Vendor == "HygonGenuine"
	topoext := maxExt >= leafAMDCache && q(leafExtFeatures, 0).ECX&amdTopoExtBit != 0
	var err error
	switch {
	case !amd && maxLeaf >= leafIntelCache:
		info.Leaf = leafIntelCache
		info.Caches, err = cacheLeaves(q, leafIntelCache)
	case amd && topoext:
		info.Leaf = leafAMDCache
		info.Caches, err = cacheLeaves(q, leafAMDCache)
	case amd && maxExt >= leafAMDL2L3:
		info.Leaf, info.Caches = leafAMDL2L3, legacyAMDCaches(q)
	}
	if err != nil {
		return info, err
	}
	if len(info.Caches) == 0 {
		return info, fmt.Errorf("cpuid: %s reports no cache in leaf %#x: %w", info.Vendor, info.Leaf, ErrNoCacheInfo)
	}
	return info, nil
}

func cacheLeaves(q CPUIDFunc, leaf uint32) ([]CacheLeaf, error) {
	var cs []CacheLeaf
	for sub := uint32(0); sub < maxCacheLeaves; sub++ {
		r := q(leaf, sub)
		c, ok := DecodeCacheLeaf(r)
		if !ok {
			break
		}
		if c.Level == 0 || c.Size == 0 {
			return nil, fmt.Errorf("cpuid: leaf %#x subleaf %d (%#x) describes no plausible cache", leaf, sub, r)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// legacyAMDCaches decodes leaves 0x80000005/6 of AMD CPUs without TOPOEXT.
// They give sizes but not sharing: L1 and L2 are taken as private and L3
// as shared by every CPU, which was true of those processors.
func legacyAMDCaches(q CPUIDFunc) []CacheLeaf {
	var cs []CacheLeaf
	l1 := q(leafAMDL1, 0)
	if kb := l1.ECX >> 24; kb != 0 {
		cs = append(cs, CacheLeaf{Level: 1, Type: DataCache, Size: int64(kb) << 10, LineSize: int(l1.ECX & 0xff), MaxSharing: 1})
	}
	if kb := l1.EDX >> 24; kb != 0 {
		cs = append(cs, CacheLeaf{Level: 1, Type: InstructionCache, Size: int64(kb) << 10, LineSize: int(l1.EDX & 0xff), MaxSharing: 1})
	}
	l23 := q(leafAMDL2L3, 0)
	if kb := l23.ECX >> 16; kb != 0 {
		cs = append(cs, CacheLeaf{Level: 2, Type: UnifiedCache, Size: int64(kb) << 10, LineSize: int(l23.ECX & 0xff), MaxSharing: 1})
	}
	if half := l23.EDX >> 18; half != 0 {
		cs = append(cs, CacheLeaf{Level: 3, Type: UnifiedCache, Size: int64(half) << 19, LineSize: int(l23.EDX & 0xff), MaxSharing: 0})
	}
	return cs
}

func regString(regs ...uint32) string {
	b := make([]byte, 0, 4*len(regs))
	for _, r := range regs {
		b = binary.LittleEndian.AppendUint32(b, r)
	}
	return string(b)
}

// TopologyFromCPUID builds the topology from each CPU's decoded CPUID:
// CPUs whose APIC IDs agree above the sharing shift share the cache.
func TopologyFromCPUID(perCPU map[int]CPUIDInfo) (*Topology, error) {
	if len(perCPU) == 0 {
		return nil, fmt.Errorf("cpuid: no CPU read: %w", ErrNoCacheInfo)
	}
	// The shift is part of the key: on hybrid parts a P-core's private L2
	// (shift 0) and an E-core cluster's shared L2 (shift 3) may compute the
	// same group number from different APIC IDs.
	type key struct {
		level int
		typ   CacheType
		shift int
		group uint32
	}
	groups := map[key]*Cache{}
	t := &Topology{}
	for cpu := range perCPU {
		t.CPUs = append(t.CPUs, cpu)
	}
	slices.Sort(t.CPUs)
	legacy := false
	for _, cpu := range t.CPUs {
		info := perCPU[cpu]
		for _, l := range info.Caches {
			k := key{level: l.Level, typ: l.Type}
			if l.MaxSharing == 0 {
				legacy = true
			} else {
				k.shift = bits.Len(uint(l.MaxSharing - 1))
				k.group = info.APICID >> k.shift
			}
			c, ok := groups[k]
			if !ok {
				c = &Cache{Level: l.Level, Type: l.Type, Size: l.Size, LineSize: l.LineSize, Source: SourceCPUID}
				groups[k] = c
			} else if c.Size != l.Size {
				return nil, fmt.Errorf("cpuid: %s of cpu%d is %s but its sharing group says %s", c.Name(), cpu, bytesize.Format(l.Size), bytesize.Format(c.Size))
			}
			c.CPUs = append(c.CPUs, cpu)
		}
	}
	for _, c := range groups {
		t.Caches = append(t.Caches, *c)
	}
	t.sortCaches()
	if legacy {
		t.Notes = append(t.Notes, "cpuid: no TOPOEXT; L1/L2 taken as private and L3 as shared by all CPUs")
	}
	return t, nil
}

// ErrNoCPUID is returned where CPUID cannot be executed (not amd64).
var ErrNoCPUID = errors.New("cpuid: not available on this architecture")
