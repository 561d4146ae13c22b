package knemesis_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Longest package documentation, in lines: a package's doc states its
// contract, and the root package's is the user's guide; the design
// narrative lives in docs/design/.
const (
	maxPackageDoc = 60
	maxRootDoc    = 100
)

// TestPackageDocsAreContracts: every package's documentation comment
// (go doc's first paragraph and what follows it) fits in maxPackageDoc
// lines, the root package's in maxRootDoc.
func TestPackageDocsAreContracts(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			ast, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			if ast.Doc == nil {
				continue
			}
			lines := fset.Position(ast.Doc.End()).Line - fset.Position(ast.Doc.Pos()).Line + 1
			limit := maxPackageDoc
			if path == "." {
				limit = maxRootDoc
			}
			if lines > limit {
				t.Errorf("%s: the package doc runs %d lines, over %d: state the contract, move the design to docs/design/", f, lines, limit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestREADMEExampleRuns: the program README.md shows is the one
// Example_parentAndChild runs: its rank function is example_test.go's,
// word for word.
func TestREADMEExampleRuns(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rank, ok := strings.Cut(string(example), "// rank is what each child runs.")
	if !ok {
		t.Fatal("example_test.go has no rank function")
	}
	if !strings.Contains(string(readme), strings.TrimSpace(rank)) {
		t.Errorf("README.md's example differs from example_test.go's rank function:\n%s", rank)
	}
}
