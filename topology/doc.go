// Package topology describes the caches of this machine and the CPUs a
// process may run on: the facts behind every cache-aware choice of
// knemesis, gathered once and kept apart from the choices themselves
// (package threshold).
//
// [Detect] returns a [Topology]: one [Cache] per cache instance, with its
// level, type, size, line size and the CPUs that share it. It reads, in
// order,
//
//   - sysfs (/sys/devices/system/cpu/cpuN/cache/indexM), what Linux itself
//     believes ([ReadSysfs]);
//   - CPUID on each online CPU, where sysfs lists no cache, as in many
//     virtual machines ([ReadCPUID], [DecodeCPUID], [TopologyFromCPUID]):
//     Intel leaf 4, AMD leaf 0x8000001D, or AMD's legacy leaves;
//   - $KNEMESIS_CACHE ([EnvCache], [ParseOverride]), a person's correction
//     that replaces whole levels, because a hypervisor may describe caches
//     that do not exist or hide the ones that do.
//
// Every cache records its [Source], and [Topology.Notes] says why a source
// was skipped, so that `lmtbench info` can explain a surprising threshold.
// Each reader takes its input as a value (an fs.FS, a CPUID function), so
// that recorded machines in testdata test it: the paper's Xeon E5345, a
// two-CCX AMD part, a KVM guest with and without cache directories.
//
// Placement facts complete the picture: [Affinity] reads the CPUs a process
// may run on (the mask a launcher set before exec), [Topology.SharedCache]
// the outermost cache two CPUs share, [ProcessesUsing] how many of a job's
// processes sit behind a cache, and [Topology.Pairs] a sharing and a
// non-sharing CPU pair for `lmtbench tune` to measure.
//
// Memory nodes are the other half: [ReadNUMA] reads each node's CPUs and
// the distance matrix from /sys/devices/system/node (sysfs is
// authoritative), [NUMA.NodeOfSet] the one node a rank's mask lies on, and
// [NUMA.CPUDistance] the distance between two ranks' CPUs.
//
// Nothing here is on a message path: detection runs once per process, and
// its answers are plain values the caller keeps.
package topology
