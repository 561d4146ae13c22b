package copyprobe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// tracefsDir is where the kernel's tracefs is usually mounted; a fresh
// machine may not have mounted it yet.
const tracefsDir = "/sys/kernel/tracing"

// ensureTracefs returns the tracefs mount point, mounting it at tracefsDir
// when nothing is mounted there: tracepoint ids and formats live only in
// tracefs. It must run before cilium/ebpf first looks for tracefs, because
// the library remembers the answer for the life of the process.
func ensureTracefs() (string, error) {
	for _, dir := range []string{tracefsDir, "/sys/kernel/debug/tracing"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.TRACEFS_MAGIC {
			return dir, nil
		}
	}
	if err := unix.Mount("tracefs", tracefsDir, "tracefs", 0, ""); err != nil {
		return "", fmt.Errorf("tracefs is not mounted and mounting it at %s failed: %w", tracefsDir, err)
	}
	return tracefsDir, nil
}

// field is one field of a tracepoint's record, from its format file.
type field struct {
	Name   string
	Offset uint32
	Size   uint32
	Signed bool
}

// eventFormat reads events/<group>/<event>/format under the tracefs root.
// A missing event is reported as os.ErrNotExist.
func eventFormat(root, group, event string) (map[string]field, error) {
	raw, err := os.ReadFile(filepath.Join(root, "events", group, event, "format"))
	if err != nil {
		return nil, err
	}
	return parseFormat(raw)
}

// parseFormat parses the field lines of a tracepoint format file:
//
//	field:unsigned int engine;	offset:16;	size:4;	signed:0;
func parseFormat(raw []byte) (map[string]field, error) {
	fields := map[string]field{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		var f field
		for _, part := range strings.Split(line, ";") {
			key, val, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok {
				continue
			}
			switch key {
			case "field":
				// "unsigned int engine", "char comm[16]", "__data_loc char[] name"
				decl := strings.Fields(val)
				if len(decl) == 0 {
					return nil, fmt.Errorf("format line %q: empty declaration", line)
				}
				name := decl[len(decl)-1]
				if i := strings.IndexByte(name, '['); i >= 0 {
					name = name[:i]
				}
				f.Name = name
			case "offset", "size", "signed":
				n, err := strconv.ParseUint(val, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("format line %q: bad %s: %w", line, key, err)
				}
				switch key {
				case "offset":
					f.Offset = uint32(n)
				case "size":
					f.Size = uint32(n)
				case "signed":
					f.Signed = n != 0
				}
			}
		}
		if f.Name == "" {
			return nil, fmt.Errorf("format line %q: no field name", line)
		}
		fields[f.Name] = f
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, errors.New("format has no fields")
	}
	return fields, nil
}

// want is what a BPF program assumes about one field of an event.
type want struct {
	name   string
	offset uint32
	size   uint32
}

// checkLayout verifies that the event's fields are where a BPF program with
// a fixed context struct reads them, so that a kernel with another layout
// gets a clear error instead of silently wrong counts.
func checkLayout(fields map[string]field, group, event string, wants ...want) error {
	for _, w := range wants {
		f, ok := fields[w.name]
		if !ok {
			return fmt.Errorf("tracepoint %s:%s has no field %q", group, event, w.name)
		}
		if f.Offset != w.offset || f.Size != w.size {
			return fmt.Errorf("tracepoint %s:%s field %q is at offset %d size %d, the probe reads offset %d size %d",
				group, event, w.name, f.Offset, f.Size, w.offset, w.size)
		}
	}
	return nil
}
