package rma

import "github.com/knemesis/knemesis/internal/memplace"

// place binds this rank's part of the window to its node, as its owner
// maps it (its loads and the peers' puts land there); the notification
// rings are smaller than a page and stay where the file's pages are.
func (w *Window) place() {
	w.placed = memplace.Place(w.local).String()
}

// Placement says where this rank's part of the window lives.
func (w *Window) Placement() string { return w.placed }
