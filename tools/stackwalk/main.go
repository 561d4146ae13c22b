// Command stackwalk reads the stacks of a CPU profile, as
// `go tool pprof -traces` prints them, and says which of the module's
// packages a request's walk crosses and how many times each is entered:
// within one sampled stack, read from its root, a package is entered at
// each frame of it whose caller (the nearest frame of the module above
// it) is in another package. Frames outside the module (the runtime, the
// standard library) and test packages are not counted.
//
// With -through, only the stacks with a frame whose function name ends
// with it count (the benchmark's loop, not its setup).
//
// It prints, for each package any counted stack crosses, the most entries
// one stack makes; then the number of packages all stacks cross, the most
// one stack crosses, and the most returns one stack makes (an entry into a
// package the stack had already entered).
//
//	go test -run '^$' -bench InProcessSendRecv -cpuprofile cpu.prof .
//	go tool pprof -traces knemesis.test cpu.prof |
//		go run ./tools/stackwalk -through BenchmarkInProcessSendRecv
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

func main() {
	module := flag.String("module", "github.com/knemesis/knemesis", "the module whose packages are counted")
	through := flag.String("through", "", "count only the stacks with a frame whose function name ends with this")
	flag.Parse()
	w, err := read(os.Stdin, *module, *through)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stackwalk:", err)
		os.Exit(1)
	}
	w.print(os.Stdout, *module)
}

// walk is what the stacks say: for each package, the most times one stack
// entered it, and the most returns one stack made.
type walk struct {
	entries map[string]int
	stacks  int
	returns int
	widest  int // the most packages one stack crosses
}

func read(r io.Reader, module, through string) (*walk, error) {
	w := &walk{entries: map[string]int{}}
	var frames []string // leaf first, as pprof prints them
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			w.add(frames, module, through)
			frames = frames[:0]
			continue
		}
		if !strings.HasPrefix(line, " ") {
			continue // the header
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		frames = append(frames, f[len(f)-1])
	}
	w.add(frames, module, through)
	return w, sc.Err()
}

// add counts the entries of one stack, given leaf first.
func (w *walk) add(frames []string, module, through string) {
	if len(frames) == 0 || !slices.ContainsFunc(frames, func(f string) bool { return strings.HasSuffix(f, through) }) {
		return
	}
	w.stacks++
	seen := map[string]int{}
	prev, returns := "", 0
	for i := len(frames) - 1; i >= 0; i-- {
		pkg := packageOf(frames[i])
		if !strings.HasPrefix(pkg, module) || strings.HasSuffix(pkg, "_test") {
			continue
		}
		if pkg != prev {
			if seen[pkg] > 0 {
				returns++
			}
			seen[pkg]++
		}
		prev = pkg
	}
	for pkg, n := range seen {
		w.entries[pkg] = max(w.entries[pkg], n)
	}
	w.returns = max(w.returns, returns)
	w.widest = max(w.widest, len(seen))
}

// packageOf returns the import path of a function's symbol name, as
// github.com/a/b.(*T).M or github.com/a/b.f.func1 spell it.
func packageOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

func (w *walk) print(out io.Writer, module string) {
	pkgs := make([]string, 0, len(w.entries))
	for p := range w.entries {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool {
		if w.entries[pkgs[i]] != w.entries[pkgs[j]] {
			return w.entries[pkgs[i]] > w.entries[pkgs[j]]
		}
		return pkgs[i] < pkgs[j]
	})
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if name == "" {
			name = "(root)"
		}
		fmt.Fprintf(out, "%-40s entered at most %d times in one stack\n", name, w.entries[p])
	}
	fmt.Fprintf(out, "%d stacks cross %d packages, one stack at most %d; at most %d returns to an entered package in one stack\n",
		w.stacks, len(pkgs), w.widest, w.returns)
}
