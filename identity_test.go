package knemesis_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/netmod/ofinet"
	"github.com/knemesis/knemesis/rma"
)

// identityTables are the three kinds of named things every rank, tuning
// file and command line must agree on, each with the one file that
// declares their names.
var identityTables = []struct {
	kind, table string
	names       func() []string
}{
	{"LMT backend", "lmt/identity.go", func() (names []string) {
		for _, id := range lmt.Identities() {
			names = append(names, id.Name)
		}
		return names
	}},
	{"RMA mechanism", "rma/mechanism.go", func() (names []string) {
		for _, m := range append([]rma.Mechanism{rma.Self}, rma.Mechanisms()...) {
			names = append(names, m.String())
		}
		return names
	}},
	{"network provider", "netmod/ofinet/providers.go", func() (names []string) {
		for _, p := range ofinet.Providers {
			names = append(names, p.Name)
		}
		return names
	}},
}

// otherMeanings are the literals outside the tables that spell a name of
// one of them but name something else, by file: each says what.
var otherMeanings = map[string]map[string]string{
	"nemesis/netmod.go": {
		"shm":  "the path to a rank of this node, the segment: nemesis lies below the LMT and names no backend",
		"self": "the path to this rank itself",
	},
	"tools/copyprobe/attach.go": {
		"vmsplice": "the system call the copy model charges copies to",
		"knem":     "the module's tracepoint system, knem:knem_copy",
	},
	"tools/lmtbench/internal/peers/fabtests.go": {
		"shm": "libfabric's shm provider, which fi_pingpong runs over",
	},
}

// TestOneIdentityTable: outside its table, no Go source spells the name
// of a backend, an RMA mechanism or a network provider as a string
// literal; it takes the name from the table (lmt.Shm, rma.CMA.String(),
// ofinet.DefaultProvider), so that a name changes in one place and a list
// of them cannot go stale. Test files are exempt: a test spells a name as
// its user does (a Prefer list, a tuning file, a command line), and a
// test of a table must not take its expectation from the table itself.
func TestOneIdentityTable(t *testing.T) {
	owner := map[string]string{} // name → its table
	for _, tb := range identityTables {
		for _, n := range tb.names() {
			if _, ok := owner[n]; !ok { // rma's knem and cma are the LMT's names
				owner[n] = tb.table
			}
		}
	}
	found := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		found++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			table, named := owner[s]
			if err != nil || !named || path == table {
				return true
			}
			if _, other := otherMeanings[path][s]; other {
				return true
			}
			t.Errorf("%s: the literal %q spells a name of %s: take it from there", fset.Position(lit.Pos()), s, table)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no Go source found under the module root")
	}
}
