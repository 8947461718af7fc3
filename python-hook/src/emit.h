/* Part of native.c (culprit_trace._native): libtrace.so's symbols, the per-thread profile object, the inline append of an entry into the thread's sub-buffer, and the clock.
 * Included once, in this order, by native.c (one translation unit: every function stays
 * static and inlinable); not a standalone header. */

/* ---- libtrace.so symbols (NULL when not preloaded) ------------------------------- */

static struct {
    int *global_enabled;
    struct culprit_thread *(*thread_state)(void);
    int (*append_slow)(struct culprit_writer *, const void *, size_t);
    void (*emit_call)(uint8_t, uint64_t, uint64_t);
    void (*emit_return)(uint8_t, uint64_t, uint16_t);
    void (*emit_code)(uint32_t, uint8_t, uint32_t, const char *, size_t, const char *, size_t);
    void (*flush_thread)(void);
    int (*enabled)(void);
    int found;      /* all of the above resolved */
    int fast;       /* inline append allowed (thread_state + append_slow + TSC) */
} lt;

#if CULPRIT_HAVE_TSC
static void read_clock_mode(void);
#endif

static void resolve_libtrace(void) {
    if (lt.found) return;
    lt.global_enabled = (int *)dlsym(RTLD_DEFAULT, "culprit_global_enabled");
    lt.thread_state = (struct culprit_thread * (*)(void)) dlsym(RTLD_DEFAULT, "culprit_thread_state");
    lt.append_slow = (int (*)(struct culprit_writer *, const void *, size_t))dlsym(RTLD_DEFAULT, "culprit_append_slow");
    lt.emit_call = (void (*)(uint8_t, uint64_t, uint64_t))dlsym(RTLD_DEFAULT, "culprit_emit_call");
    lt.emit_return = (void (*)(uint8_t, uint64_t, uint16_t))dlsym(RTLD_DEFAULT, "culprit_emit_return");
    lt.emit_code = (void (*)(uint32_t, uint8_t, uint32_t, const char *, size_t, const char *, size_t))dlsym(
        RTLD_DEFAULT, "culprit_emit_code");
    lt.flush_thread = (void (*)(void))dlsym(RTLD_DEFAULT, "culprit_flush_thread");
    lt.enabled = (int (*)(void))dlsym(RTLD_DEFAULT, "culprit_enabled");
    lt.found = lt.emit_call && lt.emit_return && lt.emit_code && lt.flush_thread && lt.enabled;
    const char *nofast = getenv("CULPRIT_PY_NOFAST");
    lt.fast = lt.found && CULPRIT_HAVE_TSC && lt.global_enabled && lt.thread_state && lt.append_slow &&
              !(nofast && nofast[0] == '1');
#if CULPRIT_HAVE_TSC
    read_clock_mode();
#endif
}

/* ---- per-thread state: the profile object ---------------------------------------- */

typedef struct {
    PyObject_HEAD
    struct culprit_thread *ct; /* this thread's libtrace state (stable: initial-exec TLS) */
    long long depth;           /* recorded calls minus recorded returns */
    unsigned long long events; /* events seen (statistics) */
    const void *boundary;      /* the frame call_traced was called from: calls made by it
                                  are recorded as roots (site 0), as if made from C */
    PyObject *chained;         /* the program's own sys.setprofile function, called after
                                  recording each event (NULL: none) */
} ThreadState;

static void thread_state_dealloc(PyObject *o) {
    Py_CLEAR(((ThreadState *)o)->chained);
    PyObject_Free(o);
}

static PyTypeObject ThreadStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "culprit_trace._native.ThreadState",
    .tp_basicsize = sizeof(ThreadState),
    .tp_dealloc = thread_state_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Per-thread state of the Culprit profile callback.",
    .tp_new = NULL,
};

/* ---- appending entries ------------------------------------------------------------ */

#if CULPRIT_HAVE_TSC
/* Appends one encoded entry straight into the thread's sub-buffer (bufpool's writer
 * protocol: bounds check, copy, advance, Release store of the committed length), or
 * hands it to libtrace's slow path. `busy` is raised meanwhile so a signal handler
 * that traces on this thread drops its entry instead of interleaving with ours. */
static inline void append_fast(struct culprit_thread *t, const uint8_t *e, size_t n) {
    struct culprit_writer *w = &t->w;
    t->busy = 1;
    /* Compiler barriers: the entry is written strictly between raising and lowering busy,
     * as a signal handler on this thread sees it (the gcc hooks do the same). */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (w->cur != NULL && (size_t)(w->end - w->cur) >= n) {
        memcpy(w->cur, e, n);
        w->cur += n;
        /* Release: pairs with the Acquire load of `used` by a salvager / reader. */
        __atomic_store_n(w->used, (uint32_t)(w->cur - w->start), __ATOMIC_RELEASE);
    } else {
        lt.append_slow(w, e, n); /* accepts busy held (culprit.h) */
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
}
#endif

static inline int fast_ok(struct culprit_thread *t) {
    return t != NULL && t->status == 1 && t->busy == 0 &&
           __atomic_load_n(lt.global_enabled, __ATOMIC_RELAXED) != 0;
}

static inline void put48(uint8_t *p, uint64_t v) {
    uint64_t x = v & ((1ULL << 48) - 1);
    memcpy(p, &x, 6); /* little-endian target */
}

#if CULPRIT_HAVE_TSC
/* The clock, as libtrace's C hooks keep it (gcc-hooks, CULPRIT_CLOCK): `rdtsc` for every
 * entry (default; ~18 ns per read on the reference VM), or with CULPRIT_CLOCK=sampled[:N] a
 * real reading every N-th entry of a thread (N a power of two, 2..4096, default 16) and
 * whenever another entry was written on the thread since the shim's last one (a libc call,
 * a new sub-buffer); in between the previous timestamp + 1 — strictly increasing, never
 * ahead of the true TSC. libtrace records the clock mode in the trace's filter record. */
static uint32_t g_sample_mask; /* 0: rdtsc per entry */
typedef struct {
    uint8_t *last_cur; /* w.cur right after the shim's last inline append on this thread */
    uint64_t last_tsc;
    uint32_t left;
} ClockState;
static __thread ClockState t_clk;

static uint64_t sampled_tsc(struct culprit_thread *t) {
    ClockState *c = &t_clk;
    if (c->left != 0 && c->last_cur == t->w.cur) {
        c->left--;
        return ++c->last_tsc;
    }
    c->left = g_sample_mask;
    c->last_tsc = __rdtsc();
    return c->last_tsc;
}

static inline uint64_t stamp(struct culprit_thread *t) {
    return __builtin_expect(g_sample_mask != 0, 0) ? sampled_tsc(t) : __rdtsc();
}

/* After an inline append: the next sampled stamp may continue from this one. */
static inline void stamped(struct culprit_thread *t) {
    if (__builtin_expect(g_sample_mask != 0, 0)) t_clk.last_cur = t->w.cur;
}

/* CULPRIT_CLOCK as gcc-hooks/src/config.rs parses it (libtrace reports a bad value). */
static void read_clock_mode(void) {
    const char *v = getenv("CULPRIT_CLOCK");
    g_sample_mask = 0;
    if (v == NULL || strncmp(v, "sampled", 7) != 0) return;
    unsigned long n = 16;
    if (v[7] == ':') {
        char *end = NULL;
        n = strtoul(v + 8, &end, 10);
        if (end == v + 8 || *end != 0) return;
    } else if (v[7] != 0) {
        return;
    }
    if (n < 2 || n > 4096 || (n & (n - 1)) != 0) return;
    g_sample_mask = (uint32_t)(n - 1);
}
#endif

/* Greenlet switches (greenlets.h): the calls open on this thread, kept once the program
 * has imported greenlet. */
static int g_greenlets;
static void gl_pushed(uint8_t kind, uint64_t site, uint64_t callee);
static void gl_popped(uint8_t kind);

static inline void emit_call(struct culprit_thread *t, uint8_t kind, uint64_t caller, uint64_t callee) {
    if (__builtin_expect(g_greenlets, 0)) gl_pushed(kind, caller, callee);
#if CULPRIT_HAVE_TSC
    if (lt.fast && fast_ok(t)) {
        uint8_t e[24];
        uint64_t head = (stamp(t) << 8) | kind;
        memcpy(e, &head, 8);
        put48(e + 8, caller);
        put48(e + 14, callee);
        append_fast(t, e, 20);
        stamped(t);
        return;
    }
#endif
    (void)t;
    lt.emit_call(kind, caller, callee);
}

static inline void emit_return(struct culprit_thread *t, uint8_t kind, uint64_t callee, uint16_t aux) {
    if (__builtin_expect(g_greenlets, 0)) gl_popped(kind);
#if CULPRIT_HAVE_TSC
    if (lt.fast && fast_ok(t)) {
        uint8_t e[16];
        uint64_t head = (stamp(t) << 8) | kind;
        memcpy(e, &head, 8);
        put48(e + 8, callee);
        memcpy(e + 14, &aux, 2);
        append_fast(t, e, 16);
        stamped(t);
        return;
    }
#endif
    (void)t;
    lt.emit_return(kind, callee, aux);
}

static int ensure_ready(void);
static PyObject *m_start(PyObject *self, PyObject *noargs);
