package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// generated marks a results table in the docs: the command that makes it,
// then its output, then the end mark.
var generated = regexp.MustCompile("(?s)<!-- generated: lmtbench table --from (\\S+) -->\n(.*?)<!-- end generated -->")

// TestDocsTablesAreGenerated: every results table of README.md and
// docs/performance.md is exactly what `lmtbench table --from FILE` prints
// for the committed --json run it names, so that no figure in the docs is
// typed by hand or outlives its run.
func TestDocsTablesAreGenerated(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	for _, doc := range []string{"README.md", filepath.Join("docs", "performance.md")} {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks := generated.FindAllSubmatch(text, -1)
		if len(blocks) == 0 {
			t.Errorf("%s has no generated results table", doc)
		}
		for _, b := range blocks {
			from := string(b[1])
			rs, err := ReadJSON(filepath.Join(root, from))
			if err != nil {
				t.Errorf("%s: %v", doc, err)
				continue
			}
			var want bytes.Buffer
			if err := WriteMarkdown(&want, rs); err != nil {
				t.Fatal(err)
			}
			if got := string(b[2]); got != want.String() {
				t.Errorf("%s: the table of %s is not what `go run ./tools/lmtbench table --from %s` prints:\n%s\nwant:\n%s",
					doc, from, from, got, strings.TrimSpace(want.String()))
			}
		}
	}
}
