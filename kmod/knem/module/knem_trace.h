/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracepoint knem:knem_copy, one event per finished copy.  Its fields are a
 * contract with the eBPF probes (tools/): keep names, types and meaning.
 *   length  bytes copied (0 when the copy failed)
 *   engine  0 CPU copy in the caller, 1 CPU copy on an offload worker, 2 DMA
 *   pid     tgid of the process that issued the copy
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM knem

#if !defined(KNEM_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define KNEM_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(knem_copy,
	TP_PROTO(__u64 length, __u32 engine, __s32 pid),
	TP_ARGS(length, engine, pid),
	TP_STRUCT__entry(
		__field(__u64, length)
		__field(__u32, engine)
		__field(__s32, pid)
	),
	TP_fast_assign(
		__entry->length = length;
		__entry->engine = engine;
		__entry->pid = pid;
	),
	TP_printk("length=%llu engine=%u pid=%d",
		  (unsigned long long)__entry->length, __entry->engine,
		  __entry->pid)
);

#endif /* KNEM_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE knem_trace
#include <trace/define_trace.h>
