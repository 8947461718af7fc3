/*
 * hooks.c — the gcc -finstrument-functions hooks of libtrace.so, and the per-thread
 * tracer state they share with the Rust side (culprit_tls).
 *
 * A program compiled with -finstrument-functions calls
 *   __cyg_profile_func_enter(this_fn, call_site) / __cyg_profile_func_exit(this_fn, call_site)
 * around every instrumented function. glibc exports no-op versions of both, so the program
 * links without extra flags; under LD_PRELOAD=libtrace.so the definitions in libtrace.so win.
 *
 * The exported names (__cyg_profile_func_enter/exit, culprit_thread_state) are one-jump
 * trampolines in Rust (gcc-hooks/src/lib.rs) to the hidden functions here: rustc's version
 * script for a cdylib keeps only Rust-defined symbols dynamic, whatever the link arguments.
 *
 * Hot path (one event): a relaxed load of culprit_global_enabled, the thread's guard words,
 * the depth counter, the filter switch, the timestamp, a bounds check, a 20- or 16-byte copy
 * into the sub-buffer the thread holds, and a release store of the committed length.
 * No system call, no lock, no allocation, no atomic read-modify-write, errno untouched.
 * Only a full (or missing) sub-buffer goes to culprit_append_slow (Rust, tracer-preload).
 *
 * Signal safety: while an event is being appended, culprit_tls.busy is set (compiler
 * signal fences order it against the appends), so a signal handler interrupting the
 * append — whose own instrumented calls or wrapped libc calls would write to the same
 * sub-buffer — records nothing instead of tearing the entry; the hooks count what they
 * could not record then as lost. Only events in that window of a few instructions (the
 * TSC is read before it) are missed.
 *
 * Configuration (clock mode, depth limit, exclusion table) is written once by
 * culprit_hooks_configure() during tracer start-up, before culprit_global_enabled becomes 1;
 * the hooks read it with relaxed loads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "culprit.h"

#define NOINSTR __attribute__((no_instrument_function))
#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Entry kinds and sizes (bufpool::format). */
#define KIND_FN_ENTER 0x01u
#define KIND_FN_EXIT 0x02u
#define KIND_LOST 0x20u
#define ENTER_SIZE 20u
#define EXIT_SIZE 16u
#define LOST_SIZE 16u
#define ADDR_MASK ((UINT64_C(1) << 48) - 1)

/* Defined in Rust by tracer-preload. Weak, so that any binary linking this object without
 * the tracer (unit tests, tools) still links, and the hooks then stay disabled. */
extern int culprit_global_enabled __attribute__((weak));
extern int culprit_append_slow(struct culprit_writer *w, const void *entry, size_t len)
	__attribute__((weak));

/* The per-thread tracer state (see culprit.h). initial-exec: the hooks reach it with one
 * %fs-relative access. libtrace.so is loaded at start-up (LD_PRELOAD), so its TLS is in
 * the static TLS block. */
HIDDEN __thread struct culprit_thread culprit_tls __attribute__((tls_model("initial-exec")));

/* State private to the hooks, per thread. */
struct hook_thread {
	/* Sampled clock: w.cur right after this thread's last hook append (an entry written by
	 * anybody else since — a wrapped libc call, a new sub-buffer — moves it, and then the
	 * next hook event reads the TSC again). */
	uint8_t *last_cur;
	/* Sampled clock: the last timestamp written by a hook on this thread. */
	uint64_t last_tsc;
	/* Sampled clock: hook events left before the TSC is read again. */
	uint32_t left;
	/* Subtree exclusion: 0, or 1 + the depth at which an excluded subtree was entered. */
	uint32_t mute;
	/* Hook events that arrived while busy was set on this thread (from a signal handler,
	 * or from program code the tracer called back) and so were not recorded; written
	 * into the trace as a Lost marker by the next hook event that appends. Changed only
	 * with single add/sub instructions, so a signal never splits an update. */
	uint32_t unrecorded;
};
static __thread struct hook_thread hk __attribute__((tls_model("initial-exec")));

/* Configuration, written by culprit_hooks_configure() before recording starts. */
#define F_DEPTH 1u   /* a depth limit is set */
#define F_FILTER 2u  /* the exclusion table is in use */
#define F_SAMPLED 4u /* sampled clock */
static uint32_t cfg_flags;                    /* 0: the plain fast path (TSC, no filter) */
static uint32_t cfg_depth_limit = UINT32_MAX; /* record events at depth < this */
static uint32_t cfg_sample_mask;              /* sampled clock: 2^k - 1 */
/* The exclusion table, see lookup(): [0] = capacity - 1 (capacity a power of 2), then the
 * slots. One pointer, so a hook never pairs one table with another's mask; tables are
 * never freed, so a hook still probing a replaced one reads valid memory. */
static const uint64_t *cfg_table;

/* Table entry: (function address << 2) | flags; 0 marks an empty slot. */
#define EXCL_FN 1u   /* this function's own enter/exit are not recorded */
#define EXCL_TREE 2u /* nor is anything it calls */

NOINSTR static inline uint64_t hash_addr(uint64_t a)
{
	return (a >> 4) * UINT64_C(0x9E3779B97F4A7C15);
}

/* Flags of `fn` in the exclusion table (0 if absent). Linear probing; the table is at most
 * half full, so a miss ends after ~1-2 probes. */
NOINSTR static inline uint32_t lookup(uint64_t fn)
{
	/* Acquire: pairs with the release store in culprit_hooks_configure (the slots are
	 * written before the pointer is published). */
	const uint64_t *tab = __atomic_load_n(&cfg_table, __ATOMIC_ACQUIRE);
	if (tab == NULL)
		return 0;
	uint64_t mask = tab[0];
	const uint64_t *t = tab + 1;
	uint64_t i = (hash_addr(fn) >> 32) & mask;
	for (;;) {
		uint64_t e = t[i];
		if (e == 0)
			return 0;
		if ((e >> 2) == fn)
			return (uint32_t)(e & 3);
		i = (i + 1) & mask;
	}
}

/* `table`: NULL, or [capacity - 1, slots...] that live for the rest of the process. */
HIDDEN NOINSTR void culprit_hooks_configure(uint32_t depth_limit, uint32_t sample_shift,
					    const uint64_t *table)
{
	cfg_depth_limit = depth_limit ? depth_limit : UINT32_MAX;
	cfg_sample_mask = sample_shift ? ((UINT32_C(1) << sample_shift) - 1) : 0;
	__atomic_store_n(&cfg_table, table, __ATOMIC_RELEASE);
	__atomic_store_n(&cfg_flags,
			 (depth_limit ? F_DEPTH : 0) | (table ? F_FILTER : 0) | (sample_shift ? F_SAMPLED : 0),
			 __ATOMIC_RELEASE);
}

/* In a forked child, the copy of the forking thread's count of unrecorded events belongs
 * to the parent, which reports it. Depth and subtree muting stay: the child continues on
 * the same call stack. */
NOINSTR static void after_fork_child(void)
{
	hk.unrecorded = 0;
}

__attribute__((constructor)) NOINSTR static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

HIDDEN NOINSTR uint32_t culprit_hooks_lookup(uint64_t fn)
{
	return (cfg_flags & F_FILTER) ? lookup(fn) : 0;
}

HIDDEN NOINSTR struct culprit_thread *culprit_hook_thread_state(void)
{
	return &culprit_tls;
}

NOINSTR static inline uint64_t rdtsc(void)
{
	return __builtin_ia32_rdtsc();
}

/* The timestamp of one hook event when the clock is sampled: a real reading every 2^k
 * hook events, and whenever another entry was written on this thread since the last hook
 * event (a wrapped libc call such as select or recv, where time passes); in between,
 * last + 1 — strictly increasing, never ahead of the true TSC (an event takes more than
 * one cycle). */
NOINSTR static inline uint64_t sampled_timestamp(struct culprit_thread *t)
{
	if (hk.left != 0 && hk.last_cur == t->w.cur) {
		hk.left--;
		return ++hk.last_tsc;
	}
	hk.left = __atomic_load_n(&cfg_sample_mask, __ATOMIC_RELAXED);
	hk.last_tsc = rdtsc();
	return hk.last_tsc;
}

/* Filters and clock of an entry when some setting is not the default. Returns 0 if the
 * event is filtered out, else 1 with *tsc set. `d` is the depth of the call. */
NOINSTR static inline int configured_enter(struct culprit_thread *t, uint32_t flags, uint64_t fn,
					   uint32_t d, uint64_t *tsc)
{
	if (d >= __atomic_load_n(&cfg_depth_limit, __ATOMIC_RELAXED))
		return 0;
	if (flags & F_FILTER) {
		/* hk.mute is only ever set while the exclusion table is in use. */
		if (hk.mute != 0)
			return 0;
		uint32_t f = lookup(fn);
		if (f & EXCL_TREE)
			hk.mute = d + 1;
		if (f)
			return 0;
	}
	*tsc = (flags & F_SAMPLED) ? sampled_timestamp(t) : rdtsc();
	return 1;
}

/* The same for an exit at depth `d` (the depth of the returning call). Events at depth >=
 * the limit were not recorded at entry either (and cannot be the call that muted a
 * subtree: that one was entered below the limit). */
NOINSTR static inline int configured_exit(struct culprit_thread *t, uint32_t flags, uint64_t fn,
					  uint32_t d, uint64_t *tsc)
{
	if (d >= __atomic_load_n(&cfg_depth_limit, __ATOMIC_RELAXED))
		return 0;
	if (flags & F_FILTER) {
		if (hk.mute != 0) {
			if (hk.mute == d + 1)
				hk.mute = 0;
			return 0;
		}
		if (lookup(fn) != 0)
			return 0;
	}
	*tsc = (flags & F_SAMPLED) ? sampled_timestamp(t) : rdtsc();
	return 1;
}

/* The slow path of append(): no sub-buffer held, or not enough room left in it. */
__attribute__((noinline, cold)) NOINSTR static int append_slow(struct culprit_thread *t, uint64_t a,
							       uint64_t b, uint32_t c, uint32_t len)
{
	uint8_t e[ENTER_SIZE];
	int ok = 0;
	memcpy(e, &a, 8);
	memcpy(e + 8, &b, 8);
	memcpy(e + 16, &c, 4);
	if (&culprit_append_slow != NULL) {
		/* busy stays set: the slow path accepts it (culprit.h), and a signal handler
		 * meanwhile must not touch the writer the slow path is changing. */
		int saved = errno;
		ok = culprit_append_slow(&t->w, e, len);
		errno = saved;
	}
	hk.last_cur = t->w.cur;
	return ok;
}

/* Appends one entry of `len` bytes (words a, b and, for 20-byte entries, c). Called with
 * busy set. */
NOINSTR static inline int append(struct culprit_thread *t, uint64_t a, uint64_t b, uint32_t c,
				 uint32_t len, uint32_t flags)
{
	uint8_t *cur = t->w.cur;
	if (UNLIKELY((uintptr_t)t->w.end - (uintptr_t)cur < len))
		return append_slow(t, a, b, c, len);
	/* [cur, cur + len) lies inside the sub-buffer this thread holds (checked above;
	 * end == cur == NULL when none is held). memcpy: entries are unaligned. */
	memcpy(cur, &a, 8);
	memcpy(cur + 8, &b, 8);
	if (len == ENTER_SIZE)
		memcpy(cur + 16, &c, 4);
	cur += len;
	t->w.cur = cur;
	/* Release: the entry bytes happen before a salvager's Acquire load of *used
	 * (bufpool::salvage::repair) and before the publishing CAS of the slow path. */
	__atomic_store_n(t->w.used, (uint32_t)(cur - t->w.start), __ATOMIC_RELEASE);
	if (flags & F_SAMPLED)
		hk.last_cur = cur;
	return 1;
}

/* Writes the Lost marker for hk.unrecorded events (called with busy set, right after this
 * event's own entry, with its timestamp). If the marker cannot be written (no sub-buffer)
 * the count stays for the next event. */
__attribute__((noinline, cold)) NOINSTR static void report_unrecorded(struct culprit_thread *t,
									uint64_t tsc, uint32_t flags)
{
	uint32_t n = hk.unrecorded;
	if (append(t, (tsc << 8) | KIND_LOST, n, 0, LOST_SIZE, flags))
		__asm__ volatile("subl %1, %0" : "+m"(hk.unrecorded) : "r"(n));
}

NOINSTR static inline int enabled(void)
{
	return &culprit_global_enabled != NULL &&
	       __atomic_load_n(&culprit_global_enabled, __ATOMIC_RELAXED) != 0;
}

/* The hooks run only if busy == 0 and status is 0 (not attached: the slow path attaches)
 * or 1 (attached). Two 32-bit loads, not one 64-bit load of both: the previous event's
 * 32-bit store to busy would not forward to a wider load (a store-forwarding stall of
 * ~3 ns per event, measured). */
NOINSTR static inline int thread_idle(const struct culprit_thread *t)
{
	return t->busy == 0 && t->status != 2;
}

/* busy value while a hook appends (the Rust side of the tracer uses 1). */
#define BUSY_HOOK 2u

/* An event that cannot be recorded because busy is set on this thread: a signal handler
 * interrupted a hook's append (busy == BUSY_HOOK) or the tracer itself (its slow path, a
 * wrapped libc call), or the tracer called back into program code (e.g. atfork handlers
 * around a traced fork). The tracer's own code is never instrumented, so this is always a
 * program event: count it, so the trace says it is missing. Not counted before the thread
 * is attached (status 0) or after it is torn down (status 2). */
__attribute__((noinline, cold)) NOINSTR static void busy_event(struct culprit_thread *t)
{
	if (t->status == 1)
		__asm__ volatile("addl $1, %0" : "+m"(hk.unrecorded));
}

HIDDEN NOINSTR void culprit_hook_enter(void *this_fn, void *call_site)
{
	if (UNLIKELY(!enabled()))
		return;
	struct culprit_thread *t = &culprit_tls;
	if (UNLIKELY(!thread_idle(t))) {
		busy_event(t);
		return;
	}
	uint32_t flags = __atomic_load_n(&cfg_flags, __ATOMIC_RELAXED);
	uint64_t tsc = 0;
	/* The TSC is read before busy is set: the guarded window (where a signal handler's
	 * events are lost) stays a few instructions long instead of including the ~11 ns
	 * rdtsc. A handler running between the reading and the append records its events
	 * first, with later timestamps: buffer order stays exact, timestamps may then step
	 * back by the handler's duration. */
	if (LIKELY(flags == 0))
		tsc = rdtsc();
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->busy = BUSY_HOOK;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint32_t d = t->depth++;
	uint64_t fn = (uint64_t)(uintptr_t)this_fn;
	if (UNLIKELY(flags != 0) && !configured_enter(t, flags, fn, d, &tsc))
		goto out;
	{
		uint64_t site = (uint64_t)(uintptr_t)call_site & ADDR_MASK;
		/* caller u48 | callee low 16 bits, then callee bits 16..48. */
		uint64_t b = site | (fn << 48);
		uint32_t c = (uint32_t)((fn & ADDR_MASK) >> 16);
		append(t, (tsc << 8) | KIND_FN_ENTER, b, c, ENTER_SIZE, flags);
		if (UNLIKELY(hk.unrecorded != 0))
			report_unrecorded(t, tsc, flags);
	}
out:
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->busy = 0;
}

HIDDEN NOINSTR void culprit_hook_exit(void *this_fn, void *call_site)
{
	(void)call_site;
	if (UNLIKELY(!enabled()))
		return;
	struct culprit_thread *t = &culprit_tls;
	if (UNLIKELY(!thread_idle(t))) {
		busy_event(t);
		return;
	}
	uint32_t flags = __atomic_load_n(&cfg_flags, __ATOMIC_RELAXED);
	uint64_t tsc = 0;
	if (LIKELY(flags == 0))
		tsc = rdtsc(); /* before busy: see culprit_hook_enter */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->busy = BUSY_HOOK;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* Saturate at 0: functions entered before recording started return after it. */
	uint32_t d = t->depth;
	if (LIKELY(d != 0))
		t->depth = --d;
	uint64_t fn = (uint64_t)(uintptr_t)this_fn;
	if (UNLIKELY(flags != 0) && !configured_exit(t, flags, fn, d, &tsc))
		goto out;
	/* callee u48, aux u16 = 0. */
	append(t, (tsc << 8) | KIND_FN_EXIT, fn & ADDR_MASK, 0, EXIT_SIZE, flags);
	if (UNLIKELY(hk.unrecorded != 0))
		report_unrecorded(t, tsc, flags);
out:
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->busy = 0;
}
