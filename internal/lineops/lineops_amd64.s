//go:build amd64 && !race

#include "textflag.h"

// func storeRelease32(p *uint32, v uint32)
TEXT ·storeRelease32(SB), NOSPLIT, $0-12
	MOVQ	p+0(FP), AX
	MOVL	v+8(FP), BX
	MOVL	BX, 0(AX)
	RET

// func storeRelease64(p *uint64, v uint64)
TEXT ·storeRelease64(SB), NOSPLIT, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	v+8(FP), BX
	MOVQ	BX, 0(AX)
	RET

// func prefetch(p unsafe.Pointer)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ	p+0(FP), AX
	PREFETCHT0	0(AX)
	RET

// func prefetchWrite(p unsafe.Pointer)
TEXT ·prefetchWrite(SB), NOSPLIT, $0-8
	MOVQ	p+0(FP), AX
	// PREFETCHW (AX): 0F 0D /1, which the Go assembler does not name.
	BYTE	$0x0F; BYTE $0x0D; BYTE $0x08
	RET
