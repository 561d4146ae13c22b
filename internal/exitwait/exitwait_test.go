package exitwait

import (
	"os/exec"
	"testing"
)

// TestWaitReturnsOnceKilled: Wait blocks while the child lives (the child
// only ends when killed, and it is killed after Wait began), returns once
// it is a zombie, and returns at once for a pid that is gone.
func TestWaitReturnsOnceKilled(t *testing.T) {
	cmd := exec.Command("sleep", "infinity")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		done <- Wait(cmd.Process.Pid)
	}()
	<-started
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while the child was alive", err)
	default:
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after the kill: %v", err)
	}
	cmd.Wait()
	if err := Wait(cmd.Process.Pid); err != nil {
		t.Fatalf("Wait for a reaped pid: %v", err)
	}
}
