// Package jobtest runs the ranks of a job inside one test process, for
// tests and benchmarks that drive every endpoint from one goroutine: no
// second core and no waiting, only the software of a path.
package jobtest

import (
	"sync"
	"testing"

	"github.com/knemesis/knemesis/nemesis/launch"
)

// InProcess calls start for each rank of a job of size ranks, each in a
// goroutine of its own (joining a job, allocating a window over it, are
// collective: every rank must be in the call at once), and returns what
// they returned, by rank; tb fails with the first error. At the end of the
// test it calls stop for every rank the same way, concurrently, since
// freeing what was allocated together is collective too.
func InProcess[T any](tb testing.TB, size int, start func(job string, rank int) (T, error), stop func(T)) []T {
	tb.Helper()
	job := launch.NewJobName()
	got := make([]T, size)
	errs := make([]error, size)
	each(size, func(r int) { got[r], errs[r] = start(job, r) })
	// Registered first: the ranks that started are stopped whatever
	// another one's error, and stop sees what start returned with it.
	tb.Cleanup(func() { each(size, func(r int) { stop(got[r]) }) })
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return got
}

// each runs f for every rank in goroutines and waits for all of them.
func each(size int, f func(rank int)) {
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(r)
		}()
	}
	wg.Wait()
}
