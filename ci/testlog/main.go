// Command testlog reads `go test -json` on its standard input and writes
// what plain `go test` would print: each package's result line, and the
// whole output of every test that failed (of a package that failed to
// build, its errors). It also appends every skipped test, with the last
// line it logged (its skip message), to the file -skips names, one a line:
//
//	<package> <test>: <message>
//
// which .ci/check-skips reads. With -times it appends each package's
// elapsed seconds, "<seconds> <package>", to that file. It exits 1 when a
// test or package failed, so that it may stand at the end of a pipe.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

// logLine is a line a test logged: "    file_test.go:12: message".
var logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)

func main() {
	skipsFile := flag.String("skips", "", "append skipped tests and their messages to this file")
	timesFile := flag.String("times", "", "append each package's elapsed seconds to this file")
	flag.Parse()
	skips, err1 := openAppend(*skipsFile)
	times, err2 := openAppend(*timesFile)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err1, err2)
		os.Exit(2)
	}
	failed := false
	outputs := map[[2]string][]string{} // a running test's output lines
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // not an event: a build error, as go test printed it
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Print(e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Action == "output" && e.Test != "":
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "output":
			if !strings.HasPrefix(e.Output, "=== ") && e.Output != "PASS\n" {
				fmt.Print(e.Output)
			}
		case e.Action == "fail" && e.Test != "":
			failed = true
			fmt.Print(strings.Join(outputs[key], ""))
			delete(outputs, key)
		case e.Action == "skip" && e.Test != "":
			if skips != nil {
				fmt.Fprintf(skips, "%s %s: %s\n", e.Package, e.Test, skipMessage(outputs[key]))
			}
			delete(outputs, key)
		case e.Action == "pass" && e.Test != "":
			delete(outputs, key)
		case e.Action == "fail" || e.Action == "pass" || e.Action == "skip":
			failed = failed || e.Action == "fail"
			if times != nil {
				fmt.Fprintf(times, "%.1f %s\n", e.Elapsed, e.Package)
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testlog: reading go test -json:", err)
		os.Exit(2)
	}
	for _, f := range []*os.File{skips, times} {
		if f != nil && f.Close() != nil {
			os.Exit(2)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// skipMessage is the last line a skipped test logged.
func skipMessage(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if m := logLine.FindStringSubmatch(strings.TrimRight(lines[i], "\n")); m != nil {
			return m[1]
		}
	}
	return "(no message)"
}

func openAppend(name string) (*os.File, error) {
	if name == "" {
		return nil, nil
	}
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}
