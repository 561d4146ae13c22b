package lmt_test

// The tests of this package run the engine over the shm and CMA backends,
// which register themselves when imported; pipe's tests import pipe.
import (
	_ "github.com/knemesis/knemesis/cma"
	_ "github.com/knemesis/knemesis/shm"
)

// backends are those this package's tests run over.
var backends = []string{"shm", "cma", "cma-write", "cma-split", "multirail"}
