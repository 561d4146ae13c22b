// Package memplace puts a shared object's pages on the NUMA node of the
// rank that reads it most, and says where they are.
//
// [Home] is this process's node: the one node that holds every CPU of its
// affinity mask, from sysfs (package topology). A one-node machine, or a
// mask across nodes, has no home to place on; Home says which in its
// reason and [Place] then does nothing.
//
// [Place] touches each page of a range (so that a page already allocated
// elsewhere is in this process's page tables) and binds the range with
// mbind(2), MPOL_PREFERRED and MPOL_MF_MOVE: on a shmem mapping the policy
// is the file's, so pages allocated later by any process follow it, and
// pages only this process maps are moved now. MPOL_MF_MOVE_ALL, which also
// moves pages other processes map, is tried first and needs CAP_SYS_NICE.
// A refusal (a cpuset without the node) is one line naming what to change;
// nothing fails, since placement is a speed matter only.
//
// [Where] asks move_pages(2) with no target nodes where each page of a
// range is; [Share] counts the pages on one node. Both run where objects
// are created or in tests, never on a message path.
package memplace
