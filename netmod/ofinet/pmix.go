//go:build ofi && pmix

package ofinet

import (
	"fmt"
	"strings"

	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/pmix"
)

// PMIx keys: every rank publishes its address under addrKey, rank 0 the
// job's key under jobKeyKey.
const (
	addrKey   = "knemesis.ofinet.addr"
	jobKeyKey = "knemesis.jobkey"
)

// Join joins the job that mpirun or srun started this process in: rank,
// size and node from PMIx (pmix.EnvNodeMap overrides the nodes), the
// module's address published with PMIx put and commit and everyone's read
// after a fence. Ranks of this node share a segment named after the PMIx
// namespace and the node; the others are reached through a Module opened
// with cfg. Unless o carries one, the job's key (package jobkey) is drawn
// by rank 0 and handed to every rank through PMIx (put, commit, fence,
// get), and set in o's JobKey and cfg's. o may be nil; its Net is set
// here. Close the endpoint, then Finalize the client.
func Join(cfg Config, o *nemesis.Options) (*nemesis.Endpoint, *pmix.Client, error) {
	c, err := pmix.Init()
	if err != nil {
		return nil, nil, err
	}
	ep, err := joinWith(c, cfg, o)
	if err != nil {
		c.Finalize()
		return nil, nil, err
	}
	return ep, c, nil
}

func joinWith(c *pmix.Client, cfg Config, o *nemesis.Options) (*nemesis.Endpoint, error) {
	nodes := make([]int, c.Size())
	for r := range nodes {
		n, err := c.NodeOf(r)
		if err != nil {
			return nil, err
		}
		nodes[r] = n
	}
	opts := nemesis.Options{}
	if o != nil {
		opts = *o
	}
	if opts.JobKey.IsZero() {
		k, err := shareKey(c)
		if err != nil {
			return nil, err
		}
		opts.JobKey = k
	}
	cfg.JobKey = opts.JobKey
	m, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	opts.Net = &nemesis.Net{Module: m, Nodes: nodes, Exchange: func(addr []byte) ([][]byte, error) {
		return exchange(c, addr)
	}}
	ep, err := nemesis.Join(JobName(c.Namespace()), c.Rank(), c.Size(), &opts)
	if err != nil {
		m.Close()
		return nil, err
	}
	return ep, nil
}

// shareKey hands the job's key from rank 0 to every rank: rank 0 draws it
// (getrandom) and puts it, everyone fences and gets it. The key goes only
// through the job's PMIx server, which admits the job's own processes.
func shareKey(c *pmix.Client) (jobkey.Key, error) {
	if c.Rank() == 0 {
		k, err := jobkey.New()
		if err != nil {
			return jobkey.Key{}, err
		}
		if err := c.Put(jobKeyKey, k[:]); err != nil {
			return jobkey.Key{}, err
		}
	}
	if err := c.Commit(); err != nil {
		return jobkey.Key{}, err
	}
	if err := c.Fence(); err != nil {
		return jobkey.Key{}, err
	}
	b, err := c.Get(0, jobKeyKey)
	if err != nil {
		return jobkey.Key{}, fmt.Errorf("the job's key from rank 0: %w", err)
	}
	var k jobkey.Key
	if len(b) != len(k) || copy(k[:], b) != len(k) || k.IsZero() {
		return jobkey.Key{}, fmt.Errorf("ofinet: rank 0 published a %d-byte job key, want %d non-zero bytes", len(b), len(k))
	}
	return k, nil
}

// exchange is the all-gather of the addresses through PMIx.
func exchange(c *pmix.Client, addr []byte) ([][]byte, error) {
	if err := c.Put(addrKey, addr); err != nil {
		return nil, err
	}
	if err := c.Commit(); err != nil {
		return nil, err
	}
	if err := c.Fence(); err != nil {
		return nil, err
	}
	addrs := make([][]byte, c.Size())
	for r := range addrs {
		a, err := c.Get(r, addrKey)
		if err != nil {
			return nil, fmt.Errorf("address of rank %d: %w", r, err)
		}
		addrs[r] = a
	}
	return addrs, nil
}

// JobName turns a PMIx namespace ("prterun-host-1234@1") into the job name
// Join gives nemesis; a program that joins a second job of the same ranks
// (netbench's shared-memory-only one) derives its name from it.
func JobName(ns string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			return c
		}
		return '-'
	}, ns)
}
