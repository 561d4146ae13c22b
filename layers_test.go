package knemesis_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/knemesis/knemesis"

// layerRow is a row of docs/design/layers.md's table: | 3 | policy | `threshold` |.
var layerRow = regexp.MustCompile("^\\| *([0-9]+) *\\| *([^|]+?) *\\| *(`.*`) *\\|$")

// readLayers returns the patterns of docs/design/layers.md's table, each
// with its layer.
func readLayers(t *testing.T) map[string]int {
	f, err := os.Open("docs/design/layers.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	layers := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := layerRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, p := range strings.Fields(m[3]) {
			p = strings.Trim(p, "`")
			if _, dup := layers[p]; dup {
				t.Errorf("layers.md: %s is in two rows", p)
			}
			layers[p] = n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(layers) == 0 {
		t.Fatal("layers.md has no table of layers")
	}
	return layers
}

// layerOf returns the layer of a package (its path inside the module, "."
// for the root) by the longest pattern that matches it.
func layerOf(layers map[string]int, pkg string) (layer int, pattern string) {
	for p, n := range layers {
		tree, sub := strings.CutSuffix(p, "/...")
		if (pkg == p || sub && (pkg == tree || strings.HasPrefix(pkg, tree+"/"))) && len(p) > len(pattern) {
			layer, pattern = n, p
		}
	}
	return layer, pattern
}

type listed struct {
	ImportPath string
	Imports    []string
}

// goList runs go list -deps -json over the module with tags.
func goList(t *testing.T, tags string) []listed {
	cmd := exec.Command("go", "list", "-deps", "-json", "-tags", tags, "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v", tags, err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p.ImportPath, module) {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

func inModule(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	return strings.CutPrefix(path, module+"/")
}

// TestLayers: every package of the module is in one layer of
// docs/design/layers.md, and none imports a package of a higher layer,
// with or without the build tags of the network module.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("lacks the go command: go list reads the import graph")
	}
	layers := readLayers(t)
	for _, tags := range []string{"", "ofi pmix"} {
		for _, p := range goList(t, tags) {
			pkg, _ := inModule(p.ImportPath)
			from, pattern := layerOf(layers, pkg)
			if pattern == "" {
				t.Errorf("%s is in no layer of docs/design/layers.md: add it to the table", pkg)
				continue
			}
			for _, imp := range p.Imports {
				dep, ok := inModule(imp)
				if !ok {
					continue
				}
				if to, _ := layerOf(layers, dep); to > from {
					t.Errorf("tags %q: %s (layer %d) imports %s (layer %d): an arrow back up", tags, pkg, from, dep, to)
				}
			}
		}
	}
}
