package cli

import (
	"fmt"
	"io"
	"strings"
)

// progress draws a one-line bar on stderr, redrawn in place.
type progress struct {
	w      io.Writer
	on     bool
	n, all int
}

func newProgress(w io.Writer, on bool, all int) *progress {
	return &progress{w: w, on: on && all > 0, all: all}
}

func (p *progress) step(what string) {
	p.n++
	if !p.on {
		return
	}
	const width = 30
	fill := p.n * width / p.all
	fmt.Fprintf(p.w, "\r[%s%s] %3d%% %-24s", strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.n*100/p.all, what)
}

func (p *progress) done() {
	if p.on {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 64))
	}
}
