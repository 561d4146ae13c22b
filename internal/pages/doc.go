// Package pages chooses the page size of a shared-memory object: the first
// of hugetlb pages, transparent huge pages and 4 KiB pages that the machine
// and the job's settings allow. It never fails: a setup that rules a mode
// out adds one line to the [Decision]'s notes, naming what to change, and
// the next mode is tried.
//
// The chain, for an object of a given size and [Backing]:
//
//   - [HugeTLB]: a memfd made with MFD_HUGETLB. Opt-in only
//     ($KNEMESIS_HUGEPAGES=hugetlb:<cap>, [ConfigFromEnv]) and capped: the
//     reserved pool belongs to the application first, so a process takes at
//     most cap bytes of it in all ([Plan] counts them). A /dev/shm file
//     cannot have them (hugetlbfs is another mount).
//   - [THP]: madvise(MADV_HUGEPAGE) on the mapping ([Advise]). It helps only
//     where the kernel allows huge pages for shmem: a memfd follows
//     /sys/kernel/mm/transparent_hugepage/shmem_enabled (and the 2 MiB
//     size's own hugepages-2048kB/shmem_enabled where it is not "inherit"),
//     a /dev/shm file its mount's huge= option, except that "deny" and
//     "force" in shmem_enabled override every mount. Private anonymous
//     memory ([Anon]) follows transparent_hugepage/enabled instead, and
//     takes hugetlb pages through MAP_HUGETLB.
//   - [Small]: 4 KiB pages.
//
// [Decide] is the pure decision over a [System] (the facts read by
// [ReadSystem] from an fs.FS rooted at /), so that recorded machines test
// it; [Plan] applies it to this host and this process's hugetlb budget.
// Nothing here is on a message path: it runs when an object is created.
package pages
