/*
 * culprit.h — the C ABI exported by libtrace.so.
 *
 * Used by the gcc -finstrument-functions hooks (linked into libtrace.so) and by the
 * Python tracing shim (which resolves these symbols with dlsym at import time).
 * Every function is safe to call from any thread, in signal handlers, before the
 * tracer is initialized (it then does nothing) and from inside the tracer itself
 * (reentrant calls are dropped, never recursed into). None changes errno.
 *
 * Entry kinds (the type byte) are those of bufpool::format::Kind:
 *   0x01 FnEnter  0x02 FnExit  0x03 PyCall  0x04 PyReturn  0x05 PyExc
 *   0x06 PyCCall  0x07 PyCReturn
 * Code-record kinds (bufpool::format::CodeKind): 0 PyCode, 1 PyBuiltin, 2 PyExcType.
 */
#ifndef CULPRIT_H
#define CULPRIT_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors bufpool::writer::WriterState (#[repr(C)], 96 bytes). C hot paths append by
 * checking end - cur, copying the entry to cur, advancing cur and storing cur - start
 * into *used with release ordering; otherwise they call culprit_append_slow. */
struct culprit_writer {
    uint8_t *cur;
    uint8_t *end;
    uint8_t *start;
    uint32_t *used;          /* AtomicU32 */
    uint32_t slot;
    uint32_t skip;
    uint64_t lost;
    uint64_t seq;
    uint32_t pid;
    uint32_t tid;
    uint64_t start_ticks;
    uint64_t lost_total;
    uint8_t *pending;        /* metadata kept until a sub-buffer is free (Rust only) */
    uint32_t pending_len;
    uint32_t pending_records;
};
_Static_assert(sizeof(struct culprit_writer) == 96, "must match bufpool::writer::WriterState");

/* Per-thread tracer state. Defined in C (gcc-hooks/c) as an initial-exec TLS variable so
 * the -finstrument-functions hooks reach it without a function call; the Rust side of
 * libtrace.so reaches it through culprit_thread_state().
 *   busy   — reentrancy guard: nonzero while the tracer itself runs on this thread;
 *            every hook and wrapper records nothing while it is set.
 *   status — 0: not attached yet (the next event goes to the slow path, which attaches
 *            the thread and records its start); 1: attached; 2: torn down (thread exit
 *            flushed it; record nothing more).
 *   depth  — current C call depth (for the depth filter).            */
struct culprit_thread {
    struct culprit_writer w;
    uint32_t busy;
    uint32_t status;
    uint32_t depth;
    uint32_t reserved;
};

/* Process-wide switch: 1 while recording, 0 before init, after a fatal setup error, or
 * when disabled. Read with relaxed loads on hot paths. */
extern int culprit_global_enabled;

/* Address of the calling thread's state (never NULL). */
struct culprit_thread *culprit_thread_state(void);

/* 1 once the tracer records in this process, 0 otherwise (not yet initialized,
 * disabled, or inside the tracer on this thread). */
int culprit_enabled(void);

/* The calling thread's writer state, or NULL when recording is off for this thread
 * (not initialized, disabled, reentrant call, thread being torn down). */
struct culprit_writer *culprit_writer(void);

/* Slow path: publish the full sub-buffer, obtain a new one (or count a drop), append.
 * Returns 1 if the entry was recorded, 0 if dropped. */
int culprit_append_slow(struct culprit_writer *w, const void *entry, size_t len);

/* Appends a call-shaped entry (20 bytes: kind, TSC now, caller, callee). */
void culprit_emit_call(uint8_t kind, uint64_t caller, uint64_t callee);

/* Appends a return-shaped entry (16 bytes: kind, TSC now, callee, aux). */
void culprit_emit_return(uint8_t kind, uint64_t callee, uint16_t aux);

/* Records a code-table entry (bufpool::format::CodeRecord) naming a Python index. */
void culprit_emit_code(uint32_t index, uint8_t kind, uint32_t first_line,
                       const char *name, size_t name_len,
                       const char *file, size_t file_len);

/* Records an injection made outside libc (a `py:` rule of CULPRIT_INJECT: the Python
 * shim raised an exception from a Python function): a MetaInject record with func
 * 0xffff, fd -1, results -1, errno 0 and the rule's text; then publishes the thread's
 * sub-buffer. */
void culprit_emit_inject(uint32_t rule, const char *spec, size_t spec_len);

/* Publishes the calling thread's current sub-buffer now. */
void culprit_flush_thread(void);

#ifdef __cplusplus
}
#endif
#endif
