package copyprobe

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// load loads one program of the embedded object against the probe's shared
// maps. Programs are loaded one by one, not as a collection, because a
// kernel that refuses one kind (fentry here) must not stop the others.
func (p *Probe) load(name string, consts map[string]uint32) (*ebpf.Program, error) {
	return p.loadFor(name, "", consts)
}

// loadFor is load for a tracing program, with the kernel function it is
// for (a tracing program is verified against one function's BTF).
func (p *Probe) loadFor(name, attachTo string, consts map[string]uint32) (*ebpf.Program, error) {
	spec := p.spec.Copy()
	ps, ok := spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("program %q missing from the BPF object", name)
	}
	if attachTo != "" {
		ps.AttachTo = attachTo
	}
	spec.Programs = map[string]*ebpf.ProgramSpec{name: ps}
	for v, val := range consts {
		if err := spec.Variables[v].Set(val); err != nil {
			return nil, fmt.Errorf("setting %s: %w", v, err)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		MapReplacements: map[string]*ebpf.Map{
			copyprobeMapCounters: p.counters,
			copyprobeMapJobTgids: p.jobs,
			copyprobeMapInflight: p.inflight,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", name, explain(err))
	}
	defer coll.Close()
	prog := coll.DetachProgram(name)
	p.progs = append(p.progs, prog)
	return prog, nil
}

// explain adds the usual cause to the errno the kernel gives.
func explain(err error) error {
	switch {
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("kernel refused with EPERM (missing capability, or the kernel forbids this program type): %w", err)
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("kernel refused with EACCES: %w", err)
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("not supported by this kernel: %w", err)
	}
	return err
}

// tracepoint attaches prog to group:event after checking the layout the
// program assumes.
func (p *Probe) tracepoint(prog *ebpf.Program, group, event string, wants ...want) error {
	fields, err := eventFormat(p.tracefs, group, event)
	if err != nil {
		return fmt.Errorf("tracepoint %s:%s: %w", group, event, err)
	}
	if err := checkLayout(fields, group, event, wants...); err != nil {
		return err
	}
	l, err := link.Tracepoint(group, event, prog, nil)
	if err != nil {
		return fmt.Errorf("attaching to tracepoint %s:%s: %w", group, event, explain(err))
	}
	p.links = append(p.links, l)
	return nil
}

// attachFollow keeps job_tgids equal to the job's process tree.
func (p *Probe) attachFollow() error {
	fork, err := p.load(copyprobeProgFollowFork, nil)
	if err != nil {
		return err
	}
	if err := p.tracepoint(fork, "task", "task_newtask",
		want{"pid", 8, 4}, want{"clone_flags", 32, 8}); err != nil {
		return err
	}
	exit, err := p.load(copyprobeProgForgetExit, nil)
	if err != nil {
		return err
	}
	return p.tracepoint(exit, "sched", "sched_process_exit")
}

func (p *Probe) attachUser(path string) Status {
	exe, err := executable(path)
	if err != nil {
		return Status{Err: fmt.Errorf("uprobe: %w", err)}
	}
	offset, skip, err := goSymbolOffset(exe, memcopy.Symbol)
	if err != nil {
		return Status{Err: fmt.Errorf("uprobe: %w", err)}
	}
	if err := p.attachUprobe(exe, offset); err != nil {
		return Status{Err: err}
	}
	return Status{Mode: ModeUprobe, Detail: fmt.Sprintf("%s+%d in %s", memcopy.Symbol, skip, exe)}
}

// attachUprobe puts the memcopy_copy program at a file offset of exe.
func (p *Probe) attachUprobe(exe string, offset uint64) error {
	prog, err := p.load(copyprobeProgMemcopyCopy, nil)
	if err != nil {
		return fmt.Errorf("uprobe: %w", err)
	}
	ex, err := link.OpenExecutable(exe)
	if err != nil {
		return fmt.Errorf("uprobe: opening %s: %w", exe, err)
	}
	// The symbol name is only a label once Address is set.
	l, err := ex.Uprobe(memcopy.Symbol, prog, &link.UprobeOptions{Address: offset})
	if err != nil {
		return fmt.Errorf("uprobe on %s in %s: %w", memcopy.Symbol, exe, explain(err))
	}
	p.links = append(p.links, l)
	return nil
}

func (p *Probe) attachKernel(mode KernelMode) Status {
	var fentryErr error
	if mode != KernelTracepoint {
		var st Status
		st, fentryErr = p.attachFentry()
		if fentryErr == nil {
			return st
		}
		fentryErr = fmt.Errorf("fentry: %w", fentryErr)
		if mode == KernelFentry {
			return Status{Err: fentryErr}
		}
	}
	rdev, err := knemRdev()
	if err == nil {
		err = p.attachSyscalls(modelledSyscalls, rdev)
	}
	if err != nil {
		err = fmt.Errorf("syscall tracepoints: %w", err)
		if fentryErr != nil {
			err = fmt.Errorf("%w; and %w", fentryErr, err)
		}
		return Status{Err: err}
	}
	st := Status{Mode: ModeTracepoint, Detail: "sys_enter/sys_exit of " + strings.Join(modelledSyscalls, ", ")}
	if fentryErr != nil {
		st.Fallback = "fell back from " + fentryErr.Error()
	}
	return st
}

// fexitHook is a kernel function and the program that reads its return
// value (the programs differ in where the return value sits).
type fexitHook struct{ fn, prog string }

// fexitRole is one kind of copy fentry mode must see, with alternative
// hooks: kernels name the functions differently (6.18's anon_pipe_read is
// 6.1's pipe_read), or cannot trace one (a trampoline for process_vm_rw's
// 7 arguments needs 6.6).
type fexitRole struct {
	copy string
	alts [][]fexitHook
	// syscalls, when no alternative attaches, count this copy with the
	// syscall model instead, and the report says so.
	syscalls []string
}

// pageCopyHooks, preferred, count every page copy the kernel makes for the
// job, whatever the file or call.
var pageCopyHooks = []fexitRole{
	{"page copies to user", [][]fexitHook{{{"copy_page_to_iter", copyprobeProgFexitRet4}}}, nil},
	{"page copies from user", [][]fexitHook{{{"copy_page_from_iter", copyprobeProgFexitRet4}}}, nil},
}

// transferHooks count the copy of each transfer path, for kernels that do
// not trace the page copy routines.
var transferHooks = []fexitRole{
	{"pipe read", [][]fexitHook{{{"anon_pipe_read", copyprobeProgFexitRet2}}, {{"pipe_read", copyprobeProgFexitRet2}}}, nil},
	{"pipe write", [][]fexitHook{{{"anon_pipe_write", copyprobeProgFexitRet2}}, {{"pipe_write", copyprobeProgFexitRet2}}}, nil},
	{"vmsplice out of a pipe", [][]fexitHook{{{"pipe_to_user", copyprobeProgFexitRet3}}}, nil},
	// Before 6.6 a trampoline takes at most 6 arguments, the syscall
	// functions have ambiguous BTF and the rest is inlined: 6.1 counts
	// CMA with the syscall model.
	{"process_vm_readv/writev", [][]fexitHook{{{"process_vm_rw", copyprobeProgFexitRet7}}},
		[]string{"process_vm_readv", "process_vm_writev"}},
}

func (p *Probe) attachFentry() (Status, error) {
	// Mark knem ioctls first, so that the page copies knem makes through
	// copy_page_to_iter are left to its tracepoint rather than counted twice.
	if rdev, err := knemRdev(); err != nil {
		return Status{}, err
	} else if rdev != 0 {
		if err := p.attachSyscalls([]string{"ioctl"}, rdev); err != nil {
			return Status{}, fmt.Errorf("marking knem ioctls: %w", err)
		}
	}
	hooked, err := p.attachFexits(pageCopyHooks, nil)
	if err == nil {
		return Status{Mode: ModeFentry, Detail: "fexit on " + strings.Join(hooked, ", ")}, nil
	}
	pageErr := err
	var viaSyscalls []string
	hooked, err = p.attachFexits(transferHooks, func(role fexitRole, why error) error {
		if err := p.attachSyscalls(role.syscalls, 0); err != nil {
			return err
		}
		viaSyscalls = append(viaSyscalls, fmt.Sprintf("%s by the syscall model (%v)", role.copy, why))
		return nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("%w; and %w", pageErr, err)
	}
	st := Status{
		Mode:     ModeFentry,
		Detail:   "fexit on " + strings.Join(hooked, ", "),
		Fallback: "page copy routines not traceable here (" + pageErr.Error() + "), so the transfer functions are hooked",
	}
	if len(viaSyscalls) > 0 {
		st.Detail += "; " + strings.Join(viaSyscalls, "; ")
	}
	return st, nil
}

// attachFexits attaches one alternative of every role, or nothing. A role
// none of whose alternatives attaches goes to fallback when it has
// syscalls to count it by.
func (p *Probe) attachFexits(roles []fexitRole, fallback func(fexitRole, error) error) (hooked []string, err error) {
	var links []link.Link
	defer func() {
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return
		}
		p.links = append(p.links, links...)
	}()
	for _, role := range roles {
		var errs []string
		ok := false
		for _, alt := range role.alts {
			altLinks, err := p.attachAlt(alt)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			links = append(links, altLinks...)
			for _, h := range alt {
				hooked = append(hooked, h.fn)
			}
			ok = true
			break
		}
		if ok {
			continue
		}
		why := fmt.Errorf("%s: %s", role.copy, strings.Join(errs, "; "))
		if fallback == nil || len(role.syscalls) == 0 {
			return nil, why
		}
		if err := fallback(role, why); err != nil {
			return nil, fmt.Errorf("%w; and its syscall tracepoints: %w", why, err)
		}
	}
	return hooked, nil
}

func (p *Probe) attachAlt(alt []fexitHook) ([]link.Link, error) {
	var links []link.Link
	for _, h := range alt {
		prog, err := p.loadFor(h.prog, h.fn, nil)
		if err == nil {
			var l link.Link
			if l, err = link.AttachTracing(link.TracingOptions{Program: prog}); err == nil {
				links = append(links, l)
				continue
			}
			err = fmt.Errorf("attaching fexit to %s: %w", h.fn, explain(err))
		}
		for _, l := range links {
			l.Close()
		}
		return nil, err
	}
	return links, nil
}

// modelledSyscalls are the calls the syscall model charges copies to; the
// BPF program switches on their x86-64 numbers. ioctl only marks knem's.
var modelledSyscalls = []string{
	"read", "readv", "write", "writev", "splice", "vmsplice",
	"process_vm_readv", "process_vm_writev", "ioctl",
}

// knemMiscDev holds "major:minor" of /dev/knem while the module is loaded.
const knemMiscDev = "/sys/class/misc/knem/dev"

// knemRdev returns the kernel's dev_t of /dev/knem (major<<20 | minor, the
// in-kernel encoding of inode.i_rdev), or 0 when the module is not loaded.
func knemRdev() (uint32, error) {
	raw, err := os.ReadFile(knemMiscDev)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var major, minor uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(raw)), "%d:%d", &major, &minor); err != nil {
		return 0, fmt.Errorf("%s = %q: %w", knemMiscDev, raw, err)
	}
	return major<<20 | minor, nil
}

func (p *Probe) attachSyscalls(calls []string, knemRdev uint32) error {
	enter, err := p.load(copyprobeProgSyscallEnter, map[string]uint32{"knem_rdev": knemRdev})
	if err != nil {
		return err
	}
	exit, err := p.load(copyprobeProgSyscallExit, nil)
	if err != nil {
		return err
	}
	for _, sc := range calls {
		if err := p.tracepoint(enter, "syscalls", "sys_enter_"+sc,
			want{"__syscall_nr", 8, 4}); err != nil {
			return err
		}
		if err := p.tracepoint(exit, "syscalls", "sys_exit_"+sc,
			want{"__syscall_nr", 8, 4}, want{"ret", 16, 8}); err != nil {
			return err
		}
	}
	return nil
}

// ErrModuleAbsent is the reason the DMA copier (and the module's CPU
// copies) are not counted on a machine without the knem module.
var ErrModuleAbsent = errors.New("module tracepoint knem:knem_copy absent: knem module not loaded")

// The knem_copy contract: system knem, event knem_copy, fields
// __u64 length, __u32 engine, __s32 pid (the process the copy is for).
const knemGroup, knemEvent = "knem", "knem_copy"

func (p *Probe) attachModule() Status {
	fields, err := eventFormat(p.tracefs, knemGroup, knemEvent)
	if errors.Is(err, os.ErrNotExist) {
		return Status{Err: ErrModuleAbsent}
	}
	if err != nil {
		return Status{Err: fmt.Errorf("module tracepoint %s:%s: %w", knemGroup, knemEvent, err)}
	}
	consts, err := knemOffsets(fields)
	if err != nil {
		return Status{Err: err}
	}
	return p.attachModuleAt(knemGroup, knemEvent, consts)
}

// attachModuleAt attaches the knem_copy program to group:event, reading the
// contract's fields at the given offsets. Tests point it at a stand-in
// event on machines without the module.
func (p *Probe) attachModuleAt(group, event string, consts map[string]uint32) Status {
	prog, err := p.load(copyprobeProgKnemCopy, consts)
	if err != nil {
		return Status{Err: fmt.Errorf("module tracepoint: %w", err)}
	}
	l, err := link.Tracepoint(group, event, prog, nil)
	if err != nil {
		return Status{Err: fmt.Errorf("attaching to %s:%s: %w", group, event, explain(err))}
	}
	p.links = append(p.links, l)
	return Status{Mode: ModeModuleTracepoint, Detail: group + ":" + event}
}

// knemOffsets finds the contract's fields in the event's format, wherever
// the module placed them.
func knemOffsets(fields map[string]field) (map[string]uint32, error) {
	consts := map[string]uint32{}
	for _, f := range []struct {
		name, variable string
		size           uint32
	}{
		{"length", "knem_length_off", 8},
		{"engine", "knem_engine_off", 4},
		{"pid", "knem_pid_off", 4},
	} {
		got, ok := fields[f.name]
		if !ok {
			return nil, fmt.Errorf("module tracepoint %s:%s has no field %q", knemGroup, knemEvent, f.name)
		}
		if got.Size != f.size {
			return nil, fmt.Errorf("module tracepoint %s:%s field %q has size %d, the contract says %d",
				knemGroup, knemEvent, f.name, got.Size, f.size)
		}
		consts[f.variable] = got.Offset
	}
	return consts, nil
}

// goSymbolOffset finds where in the executable's file the uprobe goes for
// a Go function: past its stack-growth check (see bodyOffset), located
// through the binary's pclntab. `go test` and `go run` link with -s, which
// drops the ELF symbol table the uprobe library reads, but a Go binary
// always keeps pclntab. It returns the file offset and the offset into the
// function.
func goSymbolOffset(path, symbol string) (file, skip uint64, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return 0, 0, fmt.Errorf("%s is not a Go executable (no .gopclntab)", path)
	}
	data, err := pcln.Data()
	if err != nil {
		return 0, 0, fmt.Errorf("reading .gopclntab: %w", err)
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return 0, 0, fmt.Errorf("parsing .gopclntab: %w", err)
	}
	fn := table.LookupFunc(symbol)
	if fn == nil {
		return 0, 0, fmt.Errorf("%s not found in %s (not linked in, or inlined despite go:noinline)", symbol, path)
	}
	if fn.Entry < text.Addr || fn.End > text.Addr+text.Size || fn.End <= fn.Entry {
		return 0, 0, fmt.Errorf("%s at [%#x, %#x) is outside .text of %s", symbol, fn.Entry, fn.End, path)
	}
	code := make([]byte, fn.End-fn.Entry)
	if _, err := text.ReadAt(code, int64(fn.Entry-text.Addr)); err != nil {
		return 0, 0, fmt.Errorf("reading the code of %s: %w", symbol, err)
	}
	skip = bodyOffset(code)
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_LOAD && prog.Flags&elf.PF_X != 0 &&
			prog.Vaddr <= fn.Entry && fn.Entry < prog.Vaddr+prog.Memsz {
			return fn.Entry + skip - prog.Vaddr + prog.Off, skip, nil
		}
	}
	return 0, 0, fmt.Errorf("%s at %#x is in no executable segment of %s", symbol, fn.Entry, path)
}

// bodyOffset returns how many bytes of a Go amd64 function's code precede
// its body: the stack-growth check
//
//	CMPQ SP, 16(R14)                      49 3b 66 10
//	(or LEAQ -n(SP), R12; CMPQ R12, 16(R14) for big frames)
//	JBE  morestack                        76 rel8 | 0f 86 rel32
//
// When the stack must grow, morestack jumps back to the entry and the check
// runs again, so a probe on the entry would count that call twice; past the
// check it runs once per call, with the argument registers untouched. A
// function without the check (nosplit) is probed at its entry.
func bodyOffset(code []byte) uint64 {
	i := 0
	switch {
	case bytes.HasPrefix(code, []byte{0x49, 0x3b, 0x66, 0x10}):
		i = 4
	case len(code) >= 9 && bytes.HasPrefix(code, []byte{0x4c, 0x8d, 0x64, 0x24}) &&
		bytes.HasPrefix(code[5:], []byte{0x4d, 0x3b, 0x66, 0x10}):
		i = 9
	case len(code) >= 12 && bytes.HasPrefix(code, []byte{0x4c, 0x8d, 0xa4, 0x24}) &&
		bytes.HasPrefix(code[8:], []byte{0x4d, 0x3b, 0x66, 0x10}):
		i = 12
	default:
		return 0
	}
	switch {
	case len(code) >= i+2 && code[i] == 0x76:
		return uint64(i + 2)
	case len(code) >= i+6 && code[i] == 0x0f && code[i+1] == 0x86:
		return uint64(i + 6)
	}
	return 0
}
