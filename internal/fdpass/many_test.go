package fdpass

import (
	"errors"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestManyClientsAtOnce: 256 clients asking at once (more than a listen
// backlog holds), as the ranks of a large job do, each get the
// descriptor; a client that found the backlog full (ErrNoServer wrapping
// EAGAIN) and asks again gets it too.
func TestManyClientsAtOnce(t *testing.T) {
	s, dir := serve(t)
	fd, err := NewSealed("many", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	s.Serve("mem", fd)
	var wg sync.WaitGroup
	errs := make(chan error, 256)
	retries := make(chan int, 256)
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; ; try++ {
				got, _, err := Fetch(dir, "mem", object, Want{Size: 4096})
				if errors.Is(err, unix.EAGAIN) {
					continue
				}
				if err == nil {
					unix.Close(got)
				}
				errs <- err
				retries <- try
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(retries)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	most := 0
	for r := range retries {
		most = max(most, r)
	}
	t.Logf("most retries of one client: %d", most)
}
