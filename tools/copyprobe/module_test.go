package copyprobe

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// knemFormat is the format file the kernel would generate for the
// contract's TP_STRUCT__entry(__field(u64, length) __field(u32, engine)
// __field(s32, pid)).
const knemFormat = `name: knem_copy
ID: 1234
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__u64 length;	offset:8;	size:8;	signed:0;
	field:__u32 engine;	offset:16;	size:4;	signed:0;
	field:__s32 pid;	offset:20;	size:4;	signed:1;

print fmt: "length=%llu engine=%u pid=%d", REC->length, REC->engine, REC->pid
`

func TestKnemOffsetsFollowTheFormat(t *testing.T) {
	fields, err := parseFormat([]byte(knemFormat))
	if err != nil {
		t.Fatal(err)
	}
	got, err := knemOffsets(fields)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"knem_length_off": 8, "knem_engine_off": 16, "knem_pid_off": 20}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}

	// A module that reorders its fields is followed, not misread.
	reordered := strings.NewReplacer("length;\toffset:8", "length;\toffset:16",
		"engine;\toffset:16", "engine;\toffset:24", "pid;\toffset:20", "pid;\toffset:28").Replace(knemFormat)
	fields, err = parseFormat([]byte(reordered))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = knemOffsets(fields); err != nil || got["knem_length_off"] != 16 || got["knem_engine_off"] != 24 || got["knem_pid_off"] != 28 {
		t.Errorf("reordered format: %v, %v", got, err)
	}

	// A module that breaks the contract is refused with the field named.
	wide := strings.Replace(knemFormat, "__u32 engine;\toffset:16;\tsize:4", "__u64 engine;\toffset:16;\tsize:8", 1)
	fields, _ = parseFormat([]byte(wide))
	if _, err := knemOffsets(fields); err == nil || !strings.Contains(err.Error(), `field "engine" has size 8, the contract says 4`) {
		t.Errorf("engine of size 8: err = %v", err)
	}
	missing := strings.Replace(knemFormat, "__s32 pid;", "__s32 tgid;", 1)
	fields, _ = parseFormat([]byte(missing))
	if _, err := knemOffsets(fields); err == nil || !strings.Contains(err.Error(), `has no field "pid"`) {
		t.Errorf("no pid field: err = %v", err)
	}
}

func TestParseFormatRejectsGarbage(t *testing.T) {
	for _, in := range []string{
		"",
		"name: x\nformat:\n",
		"\tfield:int x;\toffset:eight;\tsize:4;\tsigned:1;\n",
	} {
		if _, err := parseFormat([]byte(in)); err == nil {
			t.Errorf("parseFormat(%q) succeeded", in)
		}
	}
}

// openTracepoint opens a tracepoint-mode probe for one test, where BPF can
// be loaded at all.
func openTracepoint(t *testing.T) *Probe {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lacks root: loading BPF programs takes CAP_BPF and CAP_PERFMON")
	}
	p, err := Open(Options{Kernel: KernelTracepoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestModuleAbsentIsReportedNotZero(t *testing.T) {
	p := openTracepoint(t)
	_, _, dma := p.Status()
	if _, err := os.Stat(p.tracefs + "/events/knem/knem_copy"); err == nil {
		if dma.Mode != ModeModuleTracepoint || !dma.Attached() {
			t.Fatalf("knem module loaded, but the DMA copier is %v", dma)
		}
		return
	}
	if !errors.Is(dma.Err, ErrModuleAbsent) || dma.Attached() {
		t.Fatalf("DMA copier without the module: %v, want %v", dma, ErrModuleAbsent)
	}
	r, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	if s := r.String(); !strings.Contains(s, "dma") || !strings.Contains(s, ErrModuleAbsent.Error()) {
		t.Errorf("report does not say why DMA is not counted:\n%s", s)
	}
	if c := r.CopiesPerByte(1); c.String() != "user n/a, kernel 0.000, dma n/a" &&
		c.String() != "user 0.000, kernel 0.000, dma n/a" {
		t.Errorf("copies per byte = %q", c)
	}
}

// TestModuleProgramCountsByEngineAndEventPid runs the knem_copy program on
// the host, where the module cannot load, by attaching it to a stand-in
// event whose fields the test sets at will: syscalls:sys_enter_kcmp, with
// pid1 as the event's pid, type as the engine and idx1 as the length. kcmp
// with pid2 = 0 fails with ESRCH and has no effect.
func TestModuleProgramCountsByEngineAndEventPid(t *testing.T) {
	p := openTracepoint(t)
	if _, err := eventFormat(p.tracefs, "syscalls", "sys_enter_kcmp"); err != nil {
		t.Skipf("lacks tracepoint-kcmp: stand-in tracepoint syscalls:sys_enter_kcmp absent (kernel without CONFIG_KCMP): %v", err)
	}
	p.dma = p.attachModuleAt("syscalls", "sys_enter_kcmp",
		map[string]uint32{"knem_pid_off": 16, "knem_engine_off": 32, "knem_length_off": 40})
	if !p.dma.Attached() {
		t.Fatalf("knem_copy program on the stand-in event: %v", p.dma)
	}

	// The job is another process; this one is not tracked, so the filter
	// must use the event's pid, as for copies a kernel thread or a DMA
	// completion makes on a process's behalf.
	peer := exec.Command("sleep", "30")
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { peer.Process.Kill(); peer.Wait() }()
	if err := p.Track(peer.Process.Pid); err != nil {
		t.Fatal(err)
	}
	event := func(pid, engine, length int) {
		_, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), 0, uintptr(engine), uintptr(length), 0, 0)
		if errno == 0 {
			t.Fatalf("kcmp(%d, 0, ...) succeeded; the stand-in must fail harmlessly", pid)
		}
	}
	peerPid := peer.Process.Pid
	event(peerPid, 0, 1000)    // CPU copy in the caller
	event(peerPid, 1, 20000)   // CPU copy on the module's thread
	event(peerPid, 2, 300000)  // DMA
	event(peerPid, 7, 5)       // outside the contract
	event(os.Getpid(), 2, 1e6) // a process outside the job

	r, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	want := Bytes{Kernel: 21000, ModuleCPU: 21000, DMA: 300000, BadEngine: 5}
	if r.Bytes != want {
		t.Errorf("bytes = %+v, want %+v", r.Bytes, want)
	}
	if c := r.CopiesPerByte(300000); c.DMA != 1 || c.Kernel != 0.07 {
		t.Errorf("copies per byte = %v, want dma 1, kernel 0.07", c)
	}
	if !strings.Contains(r.String(), "5 bytes in knem_copy events with an unknown engine") {
		t.Errorf("report hides the unknown engine:\n%s", r)
	}
}
