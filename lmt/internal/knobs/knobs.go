// Package knobs switches off, one at a time, the stream scheduling the LMT
// engine does on its own (filling before the CTS, completing buffered
// sends early, granting ordered channels ahead), so that tests can check
// the plain protocol beneath each and benchmarks can measure what each
// saves. Users have no reason to turn them off, so they are not part of
// lmt.Config: only packages under lmt/ can reach them.
package knobs

// Knobs turns off one scheduling optimisation each.
type Knobs struct {
	// NoEarly keeps senders from filling a channel before the CTS.
	NoEarly bool
	// NoBuffered makes senders on buffered channels wait for the
	// receiver's DONE like the others.
	NoBuffered bool
	// NoGrantAhead makes receivers on ordered channels grant the channel
	// to one message at a time.
	NoGrantAhead bool
}

// Set gives cfg, an *lmt.Config, the knobs k. Package lmt installs it
// when it initialises (this package cannot import lmt, which imports it).
var Set func(cfg any, k Knobs)
