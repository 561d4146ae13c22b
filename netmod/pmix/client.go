//go:build pmix

package pmix

// #cgo pkg-config: pmix
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

// EnvNodeMap overrides the node of every rank, for tests that simulate
// several nodes on one machine: comma-separated node ids in rank order.
const EnvNodeMap = "KNEMESIS_NODE_MAP"

// Errors returned by the package, to be tested with errors.Is.
var (
	ErrNotLaunched = errors.New("pmix: not started by a PMIx launcher (mpirun, srun)")
	ErrPMIx        = errors.New("pmix: call failed")
	ErrInvalidArg  = errors.New("pmix: invalid argument")
	ErrClosed      = errors.New("pmix: client finalized")
)

// Error is a failed PMIx call: which, and PMIx's status.
type Error struct {
	Call   string // "PMIx_Get(pmix.nodeid)", ...
	Status int    // a pmix_status_t, negative
	kind   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s: %s (%d)", e.kind, e.Call, C.GoString(C.kn_pmix_strerror(C.int(e.Status))), e.Status)
}

func (e *Error) Unwrap() error { return e.kind }

func check(call string, rc C.int) error {
	if rc == C.PMIX_SUCCESS {
		return nil
	}
	return &Error{Call: call, Status: int(rc), kind: ErrPMIx}
}

// Client is this process's connection to the launcher's PMIx server.
type Client struct {
	nspace    *C.char // C copy, for every Get
	ns        string
	rank      int
	size      int
	node      int
	nodeMap   []int // from EnvNodeMap, nil when unset
	hostNodes []int // node ids numbered by hostname, where PMIX_NODEID is missing
	hostname  string
	closed    bool
}

// Init connects to the PMIx server of the launcher that started this
// process.
func Init() (*Client, error) {
	var self C.struct_kn_pmix_self
	if rc := C.kn_pmix_init(&self); rc != C.PMIX_SUCCESS {
		return nil, &Error{Call: "PMIx_Init", Status: int(rc), kind: ErrNotLaunched}
	}
	c := &Client{ns: C.GoString(&self.nspace[0]), rank: int(self.rank)}
	c.nspace = C.CString(c.ns)
	if err := c.learn(); err != nil {
		c.Finalize()
		return nil, err
	}
	return c, nil
}

// learn reads the job's size and this process's node.
func (c *Client) learn() error {
	var u C.uint32_t
	if err := c.getU32(C.PMIX_RANK_WILDCARD, C.PMIX_JOB_SIZE, &u); err != nil {
		return err
	}
	c.size = int(u)
	if c.rank < 0 || c.rank >= c.size {
		return fmt.Errorf("%w: rank %d of a job of %d", ErrPMIx, c.rank, c.size)
	}
	var host [256]C.char
	key := C.CString(C.PMIX_HOSTNAME)
	defer C.free(unsafe.Pointer(key))
	if C.kn_pmix_get_string(c.nspace, C.uint32_t(c.rank), key, &host[0], C.size_t(len(host))) == C.PMIX_SUCCESS {
		c.hostname = C.GoString(&host[0])
	}
	m, err := parseNodeMap(os.Getenv(EnvNodeMap), c.size)
	if err != nil {
		return err
	}
	c.nodeMap = m
	c.node, err = c.NodeOf(c.rank)
	return err
}

func (c *Client) getU32(rank C.uint32_t, key string, out *C.uint32_t) error {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	return check("PMIx_Get("+key+")", C.kn_pmix_get_u32(c.nspace, rank, ck, out))
}

func parseNodeMap(s string, size int) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	f := strings.Split(s, ",")
	if len(f) != size {
		return nil, fmt.Errorf("%w: %s=%q names %d ranks, the job has %d", ErrInvalidArg, EnvNodeMap, s, len(f), size)
	}
	m := make([]int, size)
	for i, v := range f {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s=%q: entry %d (%q) is not a node id", ErrInvalidArg, EnvNodeMap, s, i, v)
		}
		m[i] = n
	}
	return m, nil
}

// Rank is this process's rank in its job.
func (c *Client) Rank() int { return c.rank }

// Size is the number of processes in the job (PMIX_JOB_SIZE).
func (c *Client) Size() int { return c.size }

// Namespace is the job's PMIx namespace.
func (c *Client) Namespace() string { return c.ns }

// Node is the id of the node this process runs on.
func (c *Client) Node() int { return c.node }

// Hostname is this process's host as the launcher names it, or "".
func (c *Client) Hostname() string { return c.hostname }

// NodeOf is the node id of rank: from EnvNodeMap when set, else the
// launcher's PMIX_NODEID.
func (c *Client) NodeOf(rank int) (int, error) {
	if rank < 0 || rank >= c.size {
		return 0, fmt.Errorf("%w: rank %d of a job of %d", ErrInvalidArg, rank, c.size)
	}
	if c.nodeMap != nil {
		return c.nodeMap[rank], nil
	}
	return c.launcherNode(rank)
}

// launcherNode is rank's PMIX_NODEID, whatever EnvNodeMap says; for a
// server that does not give node ids, the rank of its host among the
// job's distinct PMIX_HOSTNAMEs, in rank order, the same in every rank.
func (c *Client) launcherNode(rank int) (int, error) {
	var u C.uint32_t
	err := c.getU32(C.uint32_t(rank), C.PMIX_NODEID, &u)
	if err == nil {
		return int(u), nil
	}
	if c.hostNodes == nil {
		if c.hostNodes, err = c.nodesByHost(); err != nil {
			return 0, err
		}
	}
	return c.hostNodes[rank], nil
}

func (c *Client) nodesByHost() ([]int, error) {
	key := C.CString(C.PMIX_HOSTNAME)
	defer C.free(unsafe.Pointer(key))
	ids := map[string]int{}
	nodes := make([]int, c.size)
	for r := range c.size {
		var host [256]C.char
		rc := C.kn_pmix_get_string(c.nspace, C.uint32_t(r), key, &host[0], C.size_t(len(host)))
		if err := check(fmt.Sprintf("PMIx_Get(rank %d, %s) (no %s either)", r, C.PMIX_HOSTNAME, C.PMIX_NODEID), rc); err != nil {
			return nil, err
		}
		h := C.GoString(&host[0])
		if _, ok := ids[h]; !ok {
			ids[h] = len(ids)
		}
		nodes[r] = ids[h]
	}
	return nodes, nil
}

// Put publishes value under key for every rank of the job (PMIX_GLOBAL);
// it is visible to others after Commit and a Fence.
func (c *Client) Put(key string, value []byte) error {
	if c.closed {
		return ErrClosed
	}
	if key == "" || len(key) > C.PMIX_MAX_KEYLEN {
		return fmt.Errorf("%w: key %q (1..%d bytes)", ErrInvalidArg, key, C.PMIX_MAX_KEYLEN)
	}
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	cv := C.CBytes(value)
	defer C.free(cv)
	return check("PMIx_Put("+key+")", C.kn_pmix_put_bytes(ck, cv, C.size_t(len(value))))
}

// Commit sends what Put stored to the server.
func (c *Client) Commit() error {
	if c.closed {
		return ErrClosed
	}
	return check("PMIx_Commit", C.kn_pmix_commit())
}

// Fence waits for every rank of the job to reach it, collecting the data
// they committed (PMIX_COLLECT_DATA).
func (c *Client) Fence() error {
	if c.closed {
		return ErrClosed
	}
	return check("PMIx_Fence", C.kn_pmix_fence())
}

// Get returns what rank published under key.
func (c *Client) Get(rank int, key string) ([]byte, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if rank < 0 || rank >= c.size {
		return nil, fmt.Errorf("%w: rank %d of a job of %d", ErrInvalidArg, rank, c.size)
	}
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	buf := make([]byte, 256)
	for {
		var n C.size_t
		rc := C.kn_pmix_get_bytes(c.nspace, C.uint32_t(rank), ck, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), &n)
		if rc == C.PMIX_ERR_NOMEM && int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		if err := check(fmt.Sprintf("PMIx_Get(rank %d, %s)", rank, key), rc); err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// Finalize ends the client.
func (c *Client) Finalize() error {
	if c.closed {
		return nil
	}
	c.closed = true
	C.free(unsafe.Pointer(c.nspace))
	return check("PMIx_Finalize", C.kn_pmix_finalize())
}
