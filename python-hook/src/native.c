/*
 * culprit_trace._native — the C profile callback of Culprit's Python shim.
 *
 * What it records (entry kinds of bufpool::format::Kind, through libtrace.so's C ABI in
 * tracer-preload/include/culprit.h, resolved with dlsym(RTLD_DEFAULT) so this module
 * loads — and stays inert — when libtrace.so is not preloaded):
 *
 *   PyTrace_CALL        PyCall    caller = py_site(calling code index, its f_lasti in
 *                                 2-byte units), callee = code index
 *   PyTrace_RETURN      PyReturn  callee = code index, aux = 0
 *     (exception exit)  PyExc     caller = exception-type index (0: unknown, see below),
 *                                 callee = code index; then PyReturn with aux = 1
 *   PyTrace_C_CALL      PyCCall   caller = py_site(current frame), callee = builtin index
 *   PyTrace_C_RETURN    PyCReturn callee = builtin index, aux = 0
 *   PyTrace_C_EXCEPTION PyCReturn callee = builtin index, aux = 1
 *   greenlet switch     PyReturn / PyCReturn aux = 2 for each open call of the greenlet
 *                       switched out, then PyCall / PyCCall again for each of the one
 *                       switched in (greenlets.h)
 *
 * Indices. A code object's index lives in its PEP 523 co_extra slot (a pointer to a
 * CodeInfo), so the per-event lookup is two loads and a compare: no hashing, no string
 * work. Builtins are keyed by their PyMethodDef (the bound-method object CPython passes
 * for a method descriptor call is a fresh temporary each time, its PyMethodDef is not)
 * in a small open-addressing table. The first time an index is used in a process its
 * name (`module.qualname`), file and first line are recorded with culprit_emit_code;
 * after fork the child records them again, lazily, before its first use (CodeInfo
 * remembers the pid it was recorded in).
 *
 * Balance. Every thread keeps a depth count in its ThreadState (the profile object
 * CPython hands back to the callback, so it costs no TLS lookup). A return whose call
 * happened before tracing started on that thread (the frames of the shim or of site.py
 * that were already running) is not recorded: every recorded return has a recorded call.
 *
 * Exceptions. CPython 3.11's profile API reports a frame left by an exception as a
 * PyTrace_RETURN with arg == NULL and hides the in-flight exception from the profiler
 * (call_trace_protected fetches it before calling us). The frame and the fact are
 * recorded (PyExc, then PyReturn aux = 1); the exception type is recorded as index 0
 * ("unknown") — getting it would need PyEval_SetTrace, whose per-line cost and clash
 * with debuggers and coverage tools this shim avoids. Frames mode (below) records it.
 *
 * Hidden and pass-through code. The shim's own functions are hidden (hide(): their frames
 * and everything they call are not recorded). The wrapper of a function a `py:` injection
 * rule targets is pass-through (pass_through(): its own frame is not recorded, the frames
 * it calls are, with the wrapper's caller as their call site), so the wrapped function's
 * calls are recorded as the program made them.
 *
 * Layout of this file: libtrace symbols; per-thread state; the inline append; the index
 * table (code objects, builtins); the profile callback (profile mode, the default);
 * exception types and the frame-evaluation function (frames mode, CULPRIT_PY_MODE=frames);
 * the program's own sys.setprofile chained behind the profile callback; threads; module
 * functions.
 *
 * Never disturb the host: the callback always returns 0 (a nonzero return would raise
 * into the program and uninstall the profiler), saves and restores any pending
 * exception around the slow paths, and clears errors of its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define CULPRIT_PY311 1
#include "internal/pycore_frame.h"
/* Mirrors the private _PyCodeObjectExtra of Objects/codeobject.c (3.6–3.11). */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} culprit_code_extra;
#else
#define CULPRIT_PY311 0
#endif
#if PY_VERSION_HEX >= 0x030C0000
/* The same private layout, unchanged in 3.12 and 3.13 (Objects/codeobject.c). */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} culprit_code_extra;
#define CULPRIT_DIRECT_EXTRA 1
#else
#define CULPRIT_DIRECT_EXTRA CULPRIT_PY311
#endif

/* ---- CPython 3.9 to 3.13: the few public calls whose names or presence differ ------- */

/* 3.12+: sys.monitoring (PEP 669) mode. The caller's site is read from the interpreter's
 * frame chain (internal headers, as Cython does): no frame object is materialized. */
#if PY_VERSION_HEX >= 0x030C0000
#define CULPRIT_MONITORING 1
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#define CULPRIT_UNDEF_BUILD_CORE 1
#endif
#include "internal/pycore_frame.h"
#include "opcode.h" /* RETURN_VALUE…: 3.12 defines them there, 3.13 in opcode_ids.h */
#ifdef CULPRIT_UNDEF_BUILD_CORE
#undef Py_BUILD_CORE
#endif
#else
#define CULPRIT_MONITORING 0
#endif

#if PY_VERSION_HEX < 0x03090000
#error "culprit_trace needs CPython 3.9 or later"
#endif

#if PY_VERSION_HEX < 0x030B0000
/* 3.9/3.10: code objects have no co_qualname; frames expose their fields. */
#define CO_QUALNAME(co) ((co)->co_name)
static PyObject *PyType_GetQualName(PyTypeObject *t) {
    return PyObject_GetAttrString((PyObject *)t, "__qualname__");
}
static inline PyObject *PyFrame_GetGlobals(PyFrameObject *f) {
    Py_XINCREF(f->f_globals);
    return f->f_globals;
}
/* Byte offset of the instruction being executed, as 3.11's PyFrame_GetLasti. */
static inline int PyFrame_GetLasti(PyFrameObject *f) {
#if PY_VERSION_HEX >= 0x030A0000
    return f->f_lasti < 0 ? -1 : f->f_lasti * 2; /* 3.10 counts 2-byte code units */
#else
    return f->f_lasti;
#endif
}
#else
#define CO_QUALNAME(co) ((co)->co_qualname)
#endif

#if PY_VERSION_HEX >= 0x030C0000
/* 3.12 renamed the code-extra API (the old names are deprecated aliases). */
#define CULPRIT_CODE_GET_EXTRA PyUnstable_Code_GetExtra
#define CULPRIT_CODE_SET_EXTRA PyUnstable_Code_SetExtra
#define CULPRIT_REQUEST_EXTRA_INDEX PyUnstable_Eval_RequestCodeExtraIndex
#else
#define CULPRIT_CODE_GET_EXTRA _PyCode_GetExtra
#define CULPRIT_CODE_SET_EXTRA _PyCode_SetExtra
#define CULPRIT_REQUEST_EXTRA_INDEX _PyEval_RequestCodeExtraIndex
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define CULPRIT_HAVE_TSC 1
#else
#define CULPRIT_HAVE_TSC 0
#endif

#include "culprit.h" /* tracer-preload/include, see setup.py */

enum {
    K_PYCALL = 0x03,
    K_PYRETURN = 0x04,
    K_PYEXC = 0x05,
    K_PYCCALL = 0x06,
    K_PYCRETURN = 0x07,
};
enum { CK_CODE = 0, CK_BUILTIN = 1, CK_EXCTYPE = 2 };

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

/* ---- the index table -------------------------------------------------------------- */

typedef struct {
    uint32_t index;
    uint32_t first_line;
    pid_t recorded_pid; /* process whose trace holds the code record; 0 = none yet */
    uint8_t kind;
    uint8_t hidden;     /* the shim's own code: its frames are not recorded */
    uint8_t transparent; /* an injection wrapper: its own frame is not recorded, but the
                          * frames it calls are, as called from the wrapper's caller */
    char *name;
    size_t name_len;
    char *file;
    size_t file_len;
} CodeInfo;

static uint32_t g_next_index = 1; /* 0 is reserved: "unknown" */
static int g_any_transparent;      /* some code is transparent (see CodeInfo) */
static Py_ssize_t g_extra_index = -1;
static pid_t g_pid;
static uint64_t g_codes_recorded;

static void record_info(CodeInfo *ci) {
    if (lt.emit_code) lt.emit_code(ci->index, ci->kind, ci->first_line, ci->name, ci->name_len, ci->file, ci->file_len);
    ci->recorded_pid = g_pid;
    g_codes_recorded++;
}

static char *dup_utf8(PyObject *s, size_t *len) {
    Py_ssize_t n = 0;
    const char *p = NULL;
    if (s != NULL && PyUnicode_Check(s)) p = PyUnicode_AsUTF8AndSize(s, &n);
    if (p == NULL) {
        PyErr_Clear();
        p = "?";
        n = 1;
    }
    char *r = PyMem_RawMalloc((size_t)n + 1);
    if (r == NULL) {
        *len = 0;
        return NULL;
    }
    memcpy(r, p, (size_t)n);
    r[n] = 0;
    *len = (size_t)n;
    return r;
}

static CodeInfo *new_info(uint8_t kind, PyObject *name, PyObject *file, uint32_t first_line) {
    CodeInfo *ci = PyMem_RawCalloc(1, sizeof(CodeInfo));
    if (ci == NULL) return NULL;
    ci->index = g_next_index++;
    ci->kind = kind;
    ci->first_line = first_line;
    ci->name = dup_utf8(name, &ci->name_len);
    ci->file = file ? dup_utf8(file, &ci->file_len) : NULL;
    return ci;
}

/* The CodeInfo of `co`, created on first sight (NULL only if memory ran out). */
static CodeInfo *code_info_create(PyCodeObject *co, PyObject *globals) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *mod = NULL;
    if (globals != NULL && PyDict_Check(globals)) mod = PyDict_GetItemString(globals, "__name__");
    PyObject *full;
    if (mod != NULL && PyUnicode_Check(mod))
        full = PyUnicode_FromFormat("%U.%U", mod, CO_QUALNAME(co));
    else
        full = PyUnicode_FromFormat("?.%U", CO_QUALNAME(co));
    if (full == NULL) PyErr_Clear();
    CodeInfo *ci = new_info(CK_CODE, full ? full : CO_QUALNAME(co), co->co_filename, (uint32_t)co->co_firstlineno);
    Py_XDECREF(full);
    if (ci != NULL && CULPRIT_CODE_SET_EXTRA((PyObject *)co, g_extra_index, ci) != 0) {
        PyErr_Clear(); /* keep the index for this event; the next sight allocates again */
    }
    PyErr_Restore(et, ev, tb);
    return ci;
}

static inline CodeInfo *code_info_peek(PyCodeObject *co) {
    void *p = NULL;
#if CULPRIT_DIRECT_EXTRA
    culprit_code_extra *ex = (culprit_code_extra *)co->co_extra;
    if (ex != NULL && g_extra_index < ex->ce_size) p = ex->ce_extras[g_extra_index];
#else
    if (CULPRIT_CODE_GET_EXTRA((PyObject *)co, g_extra_index, &p) != 0) {
        PyErr_Clear();
        p = NULL;
    }
#endif
    return (CodeInfo *)p;
}

/* Slow path of code_info: first sight of `co`, or first use in this process. */
static CodeInfo *code_info_slow(PyCodeObject *co, PyObject *globals, CodeInfo *ci) {
    if (ci == NULL) ci = code_info_create(co, globals);
    if (ci != NULL) record_info(ci);
    return ci;
}

/* The CodeInfo of `co`, named in this process's trace. */
static inline CodeInfo *code_info(PyCodeObject *co, PyObject *globals) {
    CodeInfo *ci = code_info_peek(co);
    if (ci != NULL && ci->recorded_pid == g_pid) return ci;
    return code_info_slow(co, globals, ci);
}

static inline uint32_t code_index(PyCodeObject *co, PyObject *globals) {
    CodeInfo *ci = code_info(co, globals);
    return ci != NULL ? ci->index : 0;
}

/* Builtins: PyMethodDef* -> CodeInfo*, open addressing, grows at 1/2 load. */
typedef struct {
    const void *key;
    CodeInfo *ci;
} BEntry;
static BEntry *g_btab;
static size_t g_bcap, g_bcount;

static inline size_t bhash(const void *k) {
    uint64_t x = (uint64_t)(uintptr_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int btab_put(const void *k, CodeInfo *ci) {
    if ((g_bcount + 1) * 2 > g_bcap) {
        size_t ncap = g_bcap ? g_bcap * 2 : 256;
        BEntry *n = PyMem_RawCalloc(ncap, sizeof(BEntry));
        if (n == NULL) return -1;
        for (size_t i = 0; i < g_bcap; i++) {
            if (g_btab[i].key == NULL) continue;
            size_t j = bhash(g_btab[i].key) & (ncap - 1);
            while (n[j].key != NULL) j = (j + 1) & (ncap - 1);
            n[j] = g_btab[i];
        }
        PyMem_RawFree(g_btab);
        g_btab = n;
        g_bcap = ncap;
    }
    size_t j = bhash(k) & (g_bcap - 1);
    while (g_btab[j].key != NULL) j = (j + 1) & (g_bcap - 1);
    g_btab[j].key = k;
    g_btab[j].ci = ci;
    g_bcount++;
    return 0;
}

static inline CodeInfo *btab_get(const void *k) {
    if (g_bcap == 0) return NULL;
    size_t j = bhash(k) & (g_bcap - 1);
    for (;;) {
        if (g_btab[j].key == k) return g_btab[j].ci;
        if (g_btab[j].key == NULL) return NULL;
        j = (j + 1) & (g_bcap - 1);
    }
}

/* The type among type(self)'s MRO whose tp_methods holds `ml` (the defining class), so a
 * method inherited by a Python subclass is named after the C type that defines it:
 * socket.socket(...).recv -> `_socket.socket.recv`. */
static PyTypeObject *defining_type(PyObject *self, PyMethodDef *ml) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject *mro = tp->tp_mro;
    if (mro != NULL && PyTuple_Check(mro)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
            PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
            for (PyMethodDef *m = t->tp_methods; m != NULL && m->ml_name != NULL; m++)
                if (m == ml) return t;
        }
        /* Not in any tp_methods (heap types built from specs copy nothing, but e.g.
         * methods added later): first type whose dict has a descriptor for it. */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
            PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
            PyObject *d = t->tp_dict ? PyDict_GetItemString(t->tp_dict, ml->ml_name) : NULL;
            if (d != NULL && Py_IS_TYPE(d, &PyMethodDescr_Type) && ((PyMethodDescrObject *)d)->d_method == ml)
                return t;
        }
    }
    return tp;
}

/* `module.qualname` of a type: `_socket.socket`, `builtins.list`. */
static PyObject *type_fullname(PyTypeObject *t) {
    PyObject *mod = PyObject_GetAttrString((PyObject *)t, "__module__");
    PyObject *qn = PyType_GetQualName(t);
    PyObject *r = NULL;
    if (mod != NULL && PyUnicode_Check(mod) && qn != NULL)
        r = PyUnicode_FromFormat("%U.%U", mod, qn);
    else if (qn != NULL)
        r = PyUnicode_FromFormat("%U", qn);
    PyErr_Clear();
    Py_XDECREF(mod);
    Py_XDECREF(qn);
    return r;
}

static PyObject *builtin_name(PyObject *func) {
    PyObject *r = NULL;
    if (PyCFunction_Check(func)) {
        PyCFunctionObject *f = (PyCFunctionObject *)func;
        PyMethodDef *ml = f->m_ml;
        PyObject *self = f->m_self;
        if (self != NULL && !PyModule_Check(self)) {
            PyTypeObject *t = PyType_Check(self) && (ml->ml_flags & METH_CLASS) ? (PyTypeObject *)self
                              : PyType_Check(self) && (ml->ml_flags & METH_STATIC) ? (PyTypeObject *)self
                                                                                 : NULL;
            if (t == NULL) t = defining_type(self, ml);
            PyObject *tn = type_fullname(t);
            if (tn != NULL) r = PyUnicode_FromFormat("%U.%s", tn, ml->ml_name);
            Py_XDECREF(tn);
        } else {
            PyObject *mod = f->m_module;
            if (mod != NULL && PyUnicode_Check(mod))
                r = PyUnicode_FromFormat("%U.%s", mod, ml->ml_name);
            else if (self != NULL && PyModule_Check(self)) {
                const char *mn = PyModule_GetName(self);
                if (mn != NULL) r = PyUnicode_FromFormat("%s.%s", mn, ml->ml_name);
            } else
                r = PyUnicode_FromFormat("builtins.%s", ml->ml_name);
        }
    } else {
        PyObject *tn = type_fullname(Py_TYPE(func));
        if (tn != NULL) r = PyUnicode_FromFormat("%U.__call__", tn);
        Py_XDECREF(tn);
    }
    PyErr_Clear();
    return r;
}

static uint32_t builtin_index_slow(const void *key, PyObject *func, CodeInfo *ci) {
    if (ci == NULL) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *name = builtin_name(func);
        ci = new_info(CK_BUILTIN, name, NULL, 0);
        Py_XDECREF(name);
        if (ci != NULL && btab_put(key, ci) != 0) { /* keep going: recorded again next time */
        }
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        if (ci == NULL) return 0;
    }
    record_info(ci);
    return ci->index;
}

static inline uint32_t builtin_index(PyObject *func) {
    const void *key = PyCFunction_Check(func) ? (const void *)((PyCFunctionObject *)func)->m_ml
                                              : (const void *)Py_TYPE(func);
    CodeInfo *ci = btab_get(key);
    if (ci != NULL && ci->recorded_pid == g_pid) return ci->index;
    return builtin_index_slow(key, func, ci);
}

/* ---- frames ----------------------------------------------------------------------- */

#if CULPRIT_PY311
static inline int frame_incomplete(_PyInterpreterFrame *f) {
    return f->owner != FRAME_OWNED_BY_GENERATOR && f->prev_instr < _PyCode_CODE(f->f_code) + f->f_code->_co_firsttraceable;
}

/* Is `f` a frame of transparent code (an injection wrapper)? Its callees' site is its
 * caller's. One load while no code is transparent. */
static inline int frame_transparent(_PyInterpreterFrame *f) {
    if (__builtin_expect(!g_any_transparent, 1)) return 0;
    CodeInfo *ci = code_info_peek(f->f_code);
    return ci != NULL && ci->transparent;
}

/* py_site of an interpreter frame: its code index and the offset (2-byte units) of the
 * instruction it is executing. */
static inline uint64_t site_of(_PyInterpreterFrame *f) {
    uint32_t ci = code_index(f->f_code, f->f_globals);
    int lasti = _PyInterpreterFrame_LASTI(f);
    uint32_t units = lasti < 0 ? 0 : (uint32_t)lasti;
    return ((uint64_t)ci << 16) | (units > 0xffff ? 0xffff : units);
}
#else
static uint64_t site_of_frame(PyFrameObject *f) {
    PyCodeObject *co = PyFrame_GetCode(f);
    PyObject *g = PyFrame_GetGlobals(f);
    uint32_t ci = code_index(co, g);
    int lasti = PyFrame_GetLasti(f);
    Py_DECREF(co);
    Py_XDECREF(g);
    uint32_t units = lasti < 0 ? 0 : (uint32_t)lasti / 2;
    return ((uint64_t)ci << 16) | (units > 0xffff ? 0xffff : units);
}
#endif

/* ---- the callback ----------------------------------------------------------------- */

#if CULPRIT_MONITORING
/* Profile mode on 3.12+: CPython's legacy profiler (built on sys.monitoring) reports a frame
 * left by an exception as a return with arg None, not NULL. A frame that returns or yields
 * is executing a return or yield instruction; one that unwinds is at the instruction that
 * raised. (Under line tracing the instruction reads INSTRUMENTED_LINE: taken as a return.) */
static int left_by_exception(PyFrameObject *frame) {
    _PyInterpreterFrame *f = frame->f_frame;
    if (f == NULL) return 0;
#if PY_VERSION_HEX >= 0x030D0000
    _Py_CODEUNIT *ip = f->instr_ptr;
#else
    _Py_CODEUNIT *ip = f->prev_instr;
#endif
    if (ip == NULL) return 0;
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13 has moved a suspended generator's instruction pointer past its yield. */
    if (f->owner == FRAME_OWNED_BY_GENERATOR && ip > _PyCode_CODE(_PyFrame_GetCode(f)) &&
        (ip[-1].op.code == YIELD_VALUE || ip[-1].op.code == INSTRUMENTED_YIELD_VALUE))
        return 0;
#endif
    switch (ip->op.code) {
    case RETURN_VALUE:
    case RETURN_CONST:
    case YIELD_VALUE:
    case INSTRUMENTED_RETURN_VALUE:
    case INSTRUMENTED_RETURN_CONST:
    case INSTRUMENTED_YIELD_VALUE:
    case INSTRUMENTED_LINE:
    case INSTRUMENTED_INSTRUCTION:
        return 0;
    default:
        return 1;
    }
}
#endif

static inline int record_event(ThreadState *st, PyFrameObject *frame, int what, PyObject *arg) {
    st->events++;
    if (lt.global_enabled != NULL && !__atomic_load_n(lt.global_enabled, __ATOMIC_RELAXED)) return 0;
#if CULPRIT_PY311
    _PyInterpreterFrame *f = frame->f_frame;
#endif
    switch (what) {
    case PyTrace_CALL: {
        uint64_t site = 0;
#if CULPRIT_PY311
        CodeInfo *ci = code_info(f->f_code, f->f_globals);
        if (ci != NULL && (ci->hidden || ci->transparent)) return 0;
        uint32_t callee = ci != NULL ? ci->index : 0;
        _PyInterpreterFrame *p = f->previous;
        while (p != NULL && (frame_incomplete(p) || frame_transparent(p))) p = p->previous;
        if (p != NULL && (const void *)p != st->boundary) site = site_of(p);
#else
        PyCodeObject *co = PyFrame_GetCode(frame);
        PyObject *g = PyFrame_GetGlobals(frame);
        uint32_t callee = code_index(co, g);
        Py_DECREF(co);
        Py_XDECREF(g);
        PyFrameObject *back = PyFrame_GetBack(frame);
        if (back != NULL && (const void *)back == st->boundary) {
            Py_DECREF(back);
            back = NULL;
        }
        if (back != NULL) {
            site = site_of_frame(back);
            Py_DECREF(back);
        }
#endif
        st->depth++;
        emit_call(st->ct, K_PYCALL, site, callee);
        break;
    }
    case PyTrace_RETURN: {
        if (st->depth <= 0) return 0; /* its call was not recorded */
#if CULPRIT_PY311
        CodeInfo *ci = code_info(f->f_code, f->f_globals);
        if (ci != NULL && (ci->hidden || ci->transparent)) return 0;
        uint32_t callee = ci != NULL ? ci->index : 0;
        uint32_t exc_type = 0;
        st->depth--;
#else
        st->depth--;
        PyCodeObject *co = PyFrame_GetCode(frame);
        PyObject *g = PyFrame_GetGlobals(frame);
        uint32_t callee = code_index(co, g);
        uint32_t exc_type = 0;
#if CULPRIT_MONITORING
        if (arg != NULL && left_by_exception(frame)) arg = NULL;
#endif
        Py_DECREF(co);
        Py_XDECREF(g);
#endif
        if (arg == NULL) {
            emit_call(st->ct, K_PYEXC, exc_type, callee);
            emit_return(st->ct, K_PYRETURN, callee, 1);
        } else {
            emit_return(st->ct, K_PYRETURN, callee, 0);
        }
        break;
    }
    case PyTrace_C_CALL: {
        if (arg == NULL) return 0;
        uint32_t callee = builtin_index(arg);
#if CULPRIT_PY311
        uint64_t site = frame_incomplete(f) ? 0 : site_of(f);
#else
        uint64_t site = site_of_frame(frame);
#endif
        st->depth++;
        emit_call(st->ct, K_PYCCALL, site, callee);
        break;
    }
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION: {
        if (arg == NULL || st->depth <= 0) return 0;
        st->depth--;
        uint32_t callee = builtin_index(arg);
        emit_return(st->ct, K_PYCRETURN, callee, what == PyTrace_C_EXCEPTION ? 1 : 0);
        break;
    }
    default:
        break;
    }
    return 0;
}

/* Event names a Python profile function receives, by PyTrace_* value. */
static PyObject *g_event_names[8];

/* Calls the program's own profile function as CPython's profile_trampoline would: an
 * exception it raises propagates into the program and removes it (not this callback). */
static int call_chained(ThreadState *st, PyFrameObject *frame, int what, PyObject *arg) {
    if (what < 0 || what > 7 || g_event_names[what] == NULL) return 0;
    PyObject *f = st->chained;
    Py_INCREF(f);
    PyObject *r = PyObject_CallFunctionObjArgs(f, (PyObject *)frame, g_event_names[what], arg ? arg : Py_None, NULL);
    Py_DECREF(f);
    if (r == NULL) {
        Py_CLEAR(st->chained);
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

static int profile_cb(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    ThreadState *st = (ThreadState *)obj;
    record_event(st, frame, what, arg);
    if (st->chained != NULL) return call_chained(st, frame, what, arg);
    return 0;
}



/* Exception types (frames mode knows the exception that ends a frame). Keyed by the type
 * object's address + 1, which no PyMethodDef or type key of the builtins can equal. */
static __attribute__((unused)) uint32_t exc_type_index(PyObject *type) {
    if (type == NULL || !PyType_Check(type)) return 0;
    const void *key = (const char *)type + 1;
    CodeInfo *ci = btab_get(key);
    if (ci != NULL && ci->recorded_pid == g_pid) return ci->index;
    if (ci == NULL) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *name = type_fullname((PyTypeObject *)type);
        ci = new_info(CK_EXCTYPE, name, NULL, 0);
        Py_XDECREF(name);
        if (ci != NULL) btab_put(key, ci);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        if (ci == NULL) return 0;
    }
    record_info(ci);
    return ci->index;
}

/* ---- frames mode (PEP 523) ------------------------------------------------------------
 * CULPRIT_PY_MODE=frames: instead of the profile callback, a frame-evaluation function
 * (_PyInterpreterState_SetEvalFrameFunc) wraps the evaluation of every Python frame, in
 * every thread of the interpreter at once. CPython stays out of its tracing mode (no
 * per-instruction tracing dispatch, no deoptimized instructions, no frame objects), so
 * the per-event cost is about half; the exception that ends a frame is known (PyExc
 * carries its type). Not recorded in this mode: calls of C functions (builtins) — the
 * libc calls they make are still recorded by libtrace.so. Calls are not inlined by the
 * eval loop while a frame-evaluation function is set, as with any PEP 523 user. */
#if CULPRIT_PY311
static _PyFrameEvalFunction g_prev_eval; /* evaluation function we chain to (NULL: default) */
static int g_frames_on;
static const void *g_boundary;           /* call_traced's frame: calls from it are roots */
static __thread int t_suppress;          /* >0 inside the shim's own (hidden) frames */

#define UNLIKELY_LOW_STACK() __builtin_expect((uintptr_t)__builtin_frame_address(0) < stack_limit(), 0)

static inline PyObject *eval_next(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag) {
    return g_prev_eval ? g_prev_eval(ts, f, throwflag) : _PyEval_EvalFrameDefault(ts, f, throwflag);
}

/* C stack guard. With a frame-evaluation function set, every Python call recurses in C
 * (the eval loop inlines calls only without one), so a program that raised the recursion
 * limit could run off its thread's stack where plain CPython 3.11 would not. Below this
 * address (the stack's low end + min(512 KiB, a quarter of the stack)) the frame is
 * evaluated with the recursion budget at 0: CPython itself raises RecursionError and
 * unwinds the frame as at its own limit. Computed once per thread; 1 = unknown. */
static __thread uintptr_t t_stack_limit;

static uintptr_t stack_limit(void) {
    if (t_stack_limit == 0) {
        pthread_attr_t a;
        void *addr = NULL;
        size_t size = 0;
        t_stack_limit = 1;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr != NULL && size > 0) {
                size_t margin = size / 4 < (512u << 10) ? size / 4 : (512u << 10);
                t_stack_limit = (uintptr_t)addr + margin;
            }
            pthread_attr_destroy(&a);
        }
    }
    return t_stack_limit;
}

static PyObject *eval_hook(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag) {
    if (UNLIKELY_LOW_STACK()) {
        int saved = ts->recursion_remaining;
        ts->recursion_remaining = 0;
        PyObject *r = eval_next(ts, f, throwflag);
        ts->recursion_remaining = saved;
        return r;
    }
    if (t_suppress > 0 || (lt.global_enabled != NULL && !__atomic_load_n(lt.global_enabled, __ATOMIC_RELAXED)))
        return eval_next(ts, f, throwflag);
    /* Calling a generator or coroutine function only creates the generator (the frame runs
     * its RETURN_GENERATOR prefix): not a call, as for the profile API. Its resumptions
     * (owner: the generator) are. */
    if (f->owner != FRAME_OWNED_BY_GENERATOR &&
        (f->f_code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)))
        return eval_next(ts, f, throwflag);
    CodeInfo *ci = code_info(f->f_code, f->f_globals);
    if (ci == NULL) return eval_next(ts, f, throwflag);
    if (ci->hidden) {
        t_suppress++;
        PyObject *r = eval_next(ts, f, throwflag);
        t_suppress--;
        return r;
    }
    if (ci->transparent) return eval_next(ts, f, throwflag);
    uint32_t callee = ci->index;
    uint64_t site = 0;
    _PyInterpreterFrame *p = ts->cframe ? ts->cframe->current_frame : NULL;
    while (p != NULL && (frame_incomplete(p) || frame_transparent(p))) p = p->previous;
    if (p != NULL && (const void *)p != g_boundary) site = site_of(p);
    struct culprit_thread *t = lt.thread_state ? lt.thread_state() : NULL;
    emit_call(t, K_PYCALL, site, callee);
    PyObject *r = eval_next(ts, f, throwflag);
    /* `f` may be gone now (popped on return): only `callee` is used below. */
    if (r == NULL) {
        uint32_t et = exc_type_index(PyErr_Occurred());
        emit_call(t, K_PYEXC, et, callee);
        emit_return(t, K_PYRETURN, callee, 1);
    } else {
        emit_return(t, K_PYRETURN, callee, 0);
    }
    return r;
}

static int frames_start(void) {
    if (g_frames_on) return 0;
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    g_prev_eval = cur == _PyEval_EvalFrameDefault ? NULL : cur;
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
    g_frames_on = 1;
    return 1;
}

static void frames_stop(void) {
    if (!g_frames_on) return;
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_hook)
        _PyInterpreterState_SetEvalFrameFunc(interp, g_prev_eval ? g_prev_eval : _PyEval_EvalFrameDefault);
    g_frames_on = 0;
}
#endif


/* ---- monitoring mode (PEP 669, CPython 3.12+) ------------------------------------------
 * CULPRIT_PY_MODE=monitor (the default on 3.12+): the shim registers C functions (METH_FASTCALL
 * builtins, called by the interpreter through vectorcall with no frame object and no tuple)
 * as sys.monitoring callbacks of its own tool id, for every thread of the interpreter at
 * once. Events, mapped as CPython's own legacy profiler maps them (Python/legacy_tracing.c),
 * so the entries are those of profile mode:
 *
 *   PY_START, PY_RESUME, PY_THROW  PyCall (site: the caller's frame, read from the frame
 *                                  chain; entry frames of C→Python calls skipped)
 *   PY_RETURN, PY_YIELD            PyReturn aux 0
 *   PY_UNWIND                      PyExc with the exception's type, PyReturn aux 1
 *   CALL / C_RETURN / C_RAISE      PyCCall / PyCReturn (only with CULPRIT_PY_BUILTINS=1: the
 *                                  CALL event fires for every call, Python ones included)
 *
 * Balance and hiding use per-thread counters (the callbacks get no per-thread object):
 * MonThread.depth counts recorded calls minus returns, .hidden > 0 while a frame of the
 * shim's own code runs (its callees are not recorded either, as in frames mode). */
#if CULPRIT_MONITORING
/* Per-thread state of the callbacks, one TLS block in the initial-exec model: one
 * %fs-relative access per event instead of a __tls_get_addr call (-3.5 ns/event measured on
 * 3.13). The module is dlopen'ed, so its 24 bytes come from glibc's static-TLS surplus kept
 * for such modules; were it exhausted, loading the module fails and the shim falls back to
 * the pure-Python tracer, saying so in one line. */
typedef struct {
    long long depth;          /* recorded calls minus recorded returns */
    int hidden;               /* >0 while a frame of the shim's own code runs */
    int ct_known;             /* ct looked up */
    struct culprit_thread *ct; /* libtrace's state of this thread */
} MonThread;
static __thread MonThread t_mon __attribute__((tls_model("initial-exec")));
static const void *g_mboundary; /* call_traced's frame: calls made from it are roots */
static int g_mtool = -1;         /* our sys.monitoring tool id, -1 before start */
static int g_mbuiltins;          /* CALL/C_RETURN/C_RAISE registered */
static PyObject *g_mmissing;     /* sys.monitoring.MISSING (a CALL without arg0) */

static inline struct culprit_thread *mthread(MonThread *m) {
    if (!m->ct_known) {
        m->ct = lt.thread_state ? lt.thread_state() : NULL;
        m->ct_known = 1;
    }
    return m->ct;
}

static inline _PyInterpreterFrame *current_iframe(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030D0000
    return ts->current_frame;
#else
    return ts->cframe ? ts->cframe->current_frame : NULL;
#endif
}

static inline PyCodeObject *iframe_code(_PyInterpreterFrame *f) {
#if PY_VERSION_HEX >= 0x030D0000
    return (PyCodeObject *)f->f_executable;
#else
    return f->f_code;
#endif
}

static inline int mframe_transparent(_PyInterpreterFrame *p) {
    if (__builtin_expect(!g_any_transparent, 1)) return 0;
    CodeInfo *ci = code_info_peek(iframe_code(p));
    return ci != NULL && ci->transparent;
}

/* The frame a Python frame was called from: entry frames (the interpreter's marks for a
 * call from C), frames not yet started and transparent frames (injection wrappers) are
 * skipped; NULL at the bottom. */
static inline _PyInterpreterFrame *caller_iframe(_PyInterpreterFrame *f) {
    _PyInterpreterFrame *p = f ? f->previous : NULL;
    while (p != NULL && (p->owner == FRAME_OWNED_BY_CSTACK || !PyCode_Check(iframe_code(p)) || _PyFrame_IsIncomplete(p) ||
                         mframe_transparent(p)))
        p = p->previous;
    return p;
}

static inline uint64_t msite_of(_PyInterpreterFrame *p) {
    uint32_t ci = code_index(iframe_code(p), p->f_globals);
    int lasti = _PyInterpreterFrame_LASTI(p);
    uint32_t units = lasti < 0 ? 0 : (uint32_t)lasti;
    return ((uint64_t)ci << 16) | (units > 0xffff ? 0xffff : units);
}

static inline int mrecording(MonThread *m) {
    return m->hidden == 0 && (lt.global_enabled == NULL || __atomic_load_n(lt.global_enabled, __ATOMIC_RELAXED));
}

/* PY_START, PY_RESUME (code, offset); PY_THROW (code, offset, exception). */
static PyObject *mon_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || !PyCode_Check(args[0])) Py_RETURN_NONE;
    PyCodeObject *co = (PyCodeObject *)args[0];
    MonThread *m = &t_mon;
    CodeInfo *ci = code_info_peek(co);
    if (ci != NULL && ci->hidden) {
        m->hidden++;
        Py_RETURN_NONE;
    }
    if (ci != NULL && ci->transparent) Py_RETURN_NONE;
    if (!mrecording(m)) Py_RETURN_NONE;
    _PyInterpreterFrame *f = current_iframe(PyThreadState_Get());
    if (f != NULL && iframe_code(f) != co) f = NULL;
    if (ci == NULL || ci->recorded_pid != g_pid) ci = code_info_slow(co, f ? f->f_globals : NULL, ci);
    uint32_t callee = ci != NULL ? ci->index : 0;
    uint64_t site = 0;
    _PyInterpreterFrame *p = f != NULL ? caller_iframe(f) : NULL;
    if (p != NULL && (const void *)p != g_mboundary) site = msite_of(p);
    m->depth++;
    emit_call(mthread(m), K_PYCALL, site, callee);
    Py_RETURN_NONE;
}

/* Leaves a frame: hidden bookkeeping, balance; the callee index or 0 to record nothing. */
static inline uint32_t mon_leave(MonThread *m, PyObject *code) {
    if (!PyCode_Check(code)) return 0;
    CodeInfo *ci = code_info_peek((PyCodeObject *)code);
    if (ci != NULL && ci->hidden) {
        if (m->hidden > 0) m->hidden--;
        return 0;
    }
    if (ci != NULL && ci->transparent) return 0;
    if (m->depth <= 0 || !mrecording(m)) return 0;
    m->depth--;
    if (ci == NULL || ci->recorded_pid != g_pid) ci = code_info_slow((PyCodeObject *)code, NULL, ci);
    return ci != NULL ? ci->index : 0;
}

/* PY_RETURN, PY_YIELD (code, offset, value). */
static PyObject *mon_return(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1) Py_RETURN_NONE;
    MonThread *m = &t_mon;
    uint32_t callee = mon_leave(m, args[0]);
    if (callee != 0) emit_return(mthread(m), K_PYRETURN, callee, 0);
    Py_RETURN_NONE;
}

/* PY_UNWIND (code, offset, exception). */
static PyObject *mon_unwind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1) Py_RETURN_NONE;
    MonThread *m = &t_mon;
    uint32_t callee = mon_leave(m, args[0]);
    if (callee != 0) {
        uint32_t et = nargs >= 3 && args[2] != NULL ? exc_type_index((PyObject *)Py_TYPE(args[2])) : 0;
        struct culprit_thread *t = mthread(m);
        emit_call(t, K_PYEXC, et, callee);
        emit_return(t, K_PYRETURN, callee, 1);
    }
    Py_RETURN_NONE;
}

/* The builtin a CALL / C_RETURN / C_RAISE event is about, as the legacy profiler sees it:
 * a C function, or a method descriptor called with a self (keyed by its PyMethodDef). */
static inline uint32_t mon_builtin(PyObject *callable, PyObject *arg0) {
    if (PyCFunction_Check(callable)) return builtin_index(callable);
    if (Py_IS_TYPE(callable, &PyMethodDescr_Type) && arg0 != NULL && arg0 != g_mmissing) {
        PyMethodDef *ml = ((PyMethodDescrObject *)callable)->d_method;
        CodeInfo *ci = btab_get(ml);
        if (ci != NULL && ci->recorded_pid == g_pid) return ci->index;
        PyObject *bound = Py_TYPE(callable)->tp_descr_get(callable, arg0, (PyObject *)Py_TYPE(arg0));
        if (bound == NULL) {
            PyErr_Clear();
            return 0;
        }
        uint32_t r = PyCFunction_Check(bound) ? builtin_index(bound) : 0;
        Py_DECREF(bound);
        return r;
    }
    return 0;
}

/* CALL (code, offset, callable, arg0). */
static PyObject *mon_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    MonThread *m = &t_mon;
    if (nargs < 4 || !mrecording(m)) Py_RETURN_NONE;
    PyObject *callable = args[2];
    if (PyFunction_Check(callable) || PyMethod_Check(callable)) Py_RETURN_NONE;
    uint32_t callee = mon_builtin(callable, args[3]);
    if (callee == 0) Py_RETURN_NONE;
    PyThreadState *ts = PyThreadState_Get();
    _PyInterpreterFrame *f = current_iframe(ts);
    uint64_t site = f != NULL && PyCode_Check(iframe_code(f)) ? msite_of(f) : 0;
    m->depth++;
    emit_call(mthread(m), K_PYCCALL, site, callee);
    Py_RETURN_NONE;
}

/* C_RETURN, C_RAISE (code, offset, callable, arg0). */
static PyObject *mon_creturn(PyObject *self, PyObject *const *args, Py_ssize_t nargs, int raised) {
    MonThread *m = &t_mon;
    if (nargs < 4 || m->depth <= 0 || !mrecording(m)) Py_RETURN_NONE;
    uint32_t callee = mon_builtin(args[2], args[3]);
    if (callee == 0) Py_RETURN_NONE;
    m->depth--;
    emit_return(mthread(m), K_PYCRETURN, callee, (uint16_t)raised);
    Py_RETURN_NONE;
}
static PyObject *mon_creturn0(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return mon_creturn(self, args, nargs, 0);
}
static PyObject *mon_craise(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return mon_creturn(self, args, nargs, 1);
}

static PyMethodDef mon_defs[] = {
    {"py_start", (PyCFunction)(void (*)(void))mon_start, METH_FASTCALL, NULL},
    {"py_return", (PyCFunction)(void (*)(void))mon_return, METH_FASTCALL, NULL},
    {"py_unwind", (PyCFunction)(void (*)(void))mon_unwind, METH_FASTCALL, NULL},
    {"call", (PyCFunction)(void (*)(void))mon_call, METH_FASTCALL, NULL},
    {"c_return", (PyCFunction)(void (*)(void))mon_creturn0, METH_FASTCALL, NULL},
    {"c_raise", (PyCFunction)(void (*)(void))mon_craise, METH_FASTCALL, NULL},
};

/* Registers the callbacks under a free tool id (4, 3 then 1: 0 is for debuggers, 2 for
 * profilers such as cProfile, 5 for optimizers) and turns the events on. `builtins`: 0
 * Python frames, 1 and builtins. */
static int monitor_start(int builtins) {
    if (g_mtool >= 0) return 0;
    PyObject *sys = PyImport_ImportModule("sys");
    PyObject *mon = sys ? PyObject_GetAttrString(sys, "monitoring") : NULL;
    Py_XDECREF(sys);
    if (mon == NULL) return -1;
    static const int ids[] = {4, 3, 1};
    int tool = -1;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0] && tool < 0; i++) {
        PyObject *r = PyObject_CallMethod(mon, "use_tool_id", "is", ids[i], "culprit");
        if (r != NULL) {
            tool = ids[i];
            Py_DECREF(r);
        } else {
            PyErr_Clear();
        }
    }
    if (tool < 0) {
        Py_DECREF(mon);
        PyErr_SetString(PyExc_RuntimeError, "no free sys.monitoring tool id (4, 3 and 1 are taken)");
        return -1;
    }
    PyObject *events = PyObject_GetAttrString(mon, "events");
    if (g_mmissing == NULL) g_mmissing = PyObject_GetAttrString(mon, "MISSING");
    PyErr_Clear();
    struct { const char *event; int def; } map[] = {
        {"PY_START", 0}, {"PY_RESUME", 0}, {"PY_THROW", 0}, {"PY_RETURN", 1}, {"PY_YIELD", 1},
        {"PY_UNWIND", 2}, {"CALL", 3},      {"C_RETURN", 4}, {"C_RAISE", 5},
    };
    long mask = 0;
    int n = builtins ? 9 : 6;
    for (int i = 0; events != NULL && i < n; i++) {
        PyObject *ev = PyObject_GetAttrString(events, map[i].event);
        long bit = ev ? PyLong_AsLong(ev) : -1;
        Py_XDECREF(ev);
        PyObject *fn = bit > 0 ? PyCFunction_NewEx(&mon_defs[map[i].def], NULL, NULL) : NULL;
        PyObject *r = fn ? PyObject_CallMethod(mon, "register_callback", "ilO", tool, bit, fn) : NULL;
        Py_XDECREF(fn);
        if (r == NULL) {
            Py_DECREF(events);
            events = NULL;
            break;
        }
        Py_DECREF(r);
        mask |= bit;
    }
    PyObject *r = events ? PyObject_CallMethod(mon, "set_events", "il", tool, mask) : NULL;
    Py_XDECREF(events);
    if (r == NULL) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *f = PyObject_CallMethod(mon, "free_tool_id", "i", tool);
        Py_XDECREF(f);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        Py_DECREF(mon);
        return -1;
    }
    Py_DECREF(r);
    Py_DECREF(mon);
    g_mtool = tool;
    g_mbuiltins = builtins;
    return 1;
}

static void monitor_stop(void) {
    if (g_mtool < 0) return;
    PyObject *sys = PyImport_ImportModule("sys");
    PyObject *mon = sys ? PyObject_GetAttrString(sys, "monitoring") : NULL;
    Py_XDECREF(sys);
    PyObject *r = mon ? PyObject_CallMethod(mon, "set_events", "ii", g_mtool, 0) : NULL;
    Py_XDECREF(r);
    r = mon ? PyObject_CallMethod(mon, "free_tool_id", "i", g_mtool) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(mon);
    PyErr_Clear();
    g_mtool = -1;
}
#endif

PyDoc_STRVAR(start_monitor_doc,
             "start_monitor(builtins=False) -> bool\n\nMonitoring mode: records every Python frame of every "
             "thread through sys.monitoring callbacks written in C (CPython 3.12+); with builtins, calls of C "
             "functions too.");
static PyObject *m_start_monitor(PyObject *self, PyObject *args) {
    int builtins = 0;
    if (!PyArg_ParseTuple(args, "|p", &builtins)) return NULL;
#if CULPRIT_MONITORING
    if (ensure_ready() < 0) return NULL;
    int r = monitor_start(builtins);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
#else
    PyErr_SetString(PyExc_RuntimeError, "monitoring mode needs CPython 3.12 or later");
    return NULL;
#endif
}

PyDoc_STRVAR(stop_monitor_doc, "stop_monitor()\n\nTurns the monitoring callbacks off and frees the tool id.");
static PyObject *m_stop_monitor(PyObject *self, PyObject *noargs) {
#if CULPRIT_MONITORING
    monitor_stop();
#endif
    Py_RETURN_NONE;
}

PyDoc_STRVAR(start_frames_doc,
             "start_frames() -> bool\n\nFrames mode: records every Python frame of every thread through a "
             "PEP 523 frame-evaluation function (no builtins; see the module source). CPython 3.11 only.");
static PyObject *m_start_frames(PyObject *self, PyObject *noargs) {
#if CULPRIT_PY311
    if (ensure_ready() < 0) return NULL;
    return PyBool_FromLong(frames_start());
#else
    PyErr_SetString(PyExc_RuntimeError, "frames mode needs CPython 3.11");
    return NULL;
#endif
}

PyDoc_STRVAR(stop_frames_doc, "stop_frames()\n\nRemoves the frame-evaluation function.");
static PyObject *m_stop_frames(PyObject *self, PyObject *noargs) {
#if CULPRIT_PY311
    frames_stop();
#endif
    Py_RETURN_NONE;
}

PyDoc_STRVAR(pass_through_doc,
             "pass_through(code)\n\nNever records frames of this code object (an injection wrapper), but records "
             "the frames it calls as called from its caller.");
static PyObject *m_pass_through(PyObject *self, PyObject *arg) {
    if (!PyCode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "pass_through() needs a code object");
        return NULL;
    }
    if (ensure_ready() < 0) return NULL;
    CodeInfo *ci = code_info_peek((PyCodeObject *)arg);
    if (ci == NULL) ci = code_info_create((PyCodeObject *)arg, NULL);
    if (ci == NULL) return PyErr_NoMemory();
    ci->transparent = 1;
    g_any_transparent = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(hide_doc, "hide(code)\n\nNever records frames of this code object (the shim's own functions).");
static PyObject *m_hide(PyObject *self, PyObject *arg) {
    if (!PyCode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "hide() needs a code object");
        return NULL;
    }
    if (ensure_ready() < 0) return NULL;
    CodeInfo *ci = code_info_peek((PyCodeObject *)arg);
    if (ci == NULL) ci = code_info_create((PyCodeObject *)arg, NULL);
    if (ci == NULL) return PyErr_NoMemory();
    ci->hidden = 1;
    Py_RETURN_NONE;
}


/* ---- the program's own sys.setprofile ---------------------------------------------
 * The profile slot of a thread is single. So that a program (or threading.setprofile)
 * setting its own profile function keeps both working, the shim replaces sys.setprofile
 * and sys.getprofile: on a traced thread the function is called by profile_cb after each
 * event (exactly the events and arguments CPython would give it); elsewhere the real
 * functions run. */
static PyObject *g_orig_setprofile, *g_orig_getprofile;

static PyObject *sys_setprofile(PyObject *self, PyObject *func) {
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profilefunc != profile_cb || ts->c_profileobj == NULL)
        return PyObject_CallOneArg(g_orig_setprofile, func);
    if (PySys_Audit("sys.setprofile", NULL) < 0) return NULL;
    ThreadState *st = (ThreadState *)ts->c_profileobj;
    PyObject *old = st->chained;
    if (func == Py_None) {
        st->chained = NULL;
    } else {
        Py_INCREF(func);
        st->chained = func;
    }
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *sys_getprofile(PyObject *self, PyObject *noargs) {
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profilefunc != profile_cb || ts->c_profileobj == NULL) return PyObject_CallNoArgs(g_orig_getprofile);
    PyObject *f = ((ThreadState *)ts->c_profileobj)->chained;
    if (f == NULL) Py_RETURN_NONE;
    Py_INCREF(f);
    return f;
}

static PyMethodDef sys_setprofile_def = {"setprofile", sys_setprofile, METH_O,
                                         "setprofile(function)\n\nSet the profiling function (kept working "
                                         "alongside Culprit's tracer)."};
static PyMethodDef sys_getprofile_def = {"getprofile", sys_getprofile, METH_NOARGS,
                                         "getprofile()\n\nReturn the profiling function set with setprofile()."};

PyDoc_STRVAR(wrap_sys_doc, "wrap_sys(sys_module) -> bool\n\nReplaces sys.setprofile and sys.getprofile (see the source).");
static PyObject *m_wrap_sys(PyObject *self, PyObject *sys) {
    if (g_orig_setprofile != NULL) Py_RETURN_FALSE;
    PyObject *os = PyObject_GetAttrString(sys, "setprofile");
    PyObject *og = os ? PyObject_GetAttrString(sys, "getprofile") : NULL;
    PyObject *name = og ? PyUnicode_FromString("sys") : NULL;
    PyObject *ns = name ? PyCFunction_NewEx(&sys_setprofile_def, NULL, name) : NULL;
    PyObject *ng = ns ? PyCFunction_NewEx(&sys_getprofile_def, NULL, name) : NULL;
    Py_XDECREF(name);
    if (ng == NULL || PyObject_SetAttrString(sys, "setprofile", ns) < 0 ||
        PyObject_SetAttrString(sys, "getprofile", ng) < 0) {
        Py_XDECREF(os);
        Py_XDECREF(og);
        Py_XDECREF(ns);
        Py_XDECREF(ng);
        return NULL;
    }
    g_orig_setprofile = os;
    g_orig_getprofile = og;
    Py_DECREF(ns);
    Py_DECREF(ng);
    Py_RETURN_TRUE;
}


/* Removes the callback from this thread; a profile function the program set meanwhile is
 * installed in its place, as sys.setprofile would have. */
static void uninstall_here(void) {
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profilefunc != profile_cb) return;
    ThreadState *st = (ThreadState *)ts->c_profileobj;
    PyObject *chained = st ? st->chained : NULL;
    Py_XINCREF(chained);
    PyEval_SetProfile(NULL, NULL);
    if (chained != NULL) {
        PyObject *r = g_orig_setprofile ? PyObject_CallOneArg(g_orig_setprofile, chained) : NULL;
        if (r == NULL) PyErr_Clear();
        Py_XDECREF(r);
        Py_DECREF(chained);
    }
}

/* ---- threads ------------------------------------------------------------------------
 * CPython 3.11 has no PyEval_SetProfileAllThreads: a new thread gets the callback from
 * _thread.start_new_thread, which the shim replaces by start_new_thread below. It runs
 * the thread's function through thread_entry, which installs the callback first and
 * then reports an escaping exception exactly as _thread's own runner does. */

static PyObject *g_orig_start_new_thread; /* the real _thread.start_new_thread */
static PyObject *g_thread_entry;          /* thread_entry as a callable */

static PyObject *m_start(PyObject *self, PyObject *noargs);

static PyObject *thread_entry(PyObject *self, PyObject *args) {
    PyObject *func, *fargs, *fkw = NULL;
    if (!PyArg_ParseTuple(args, "OO|O", &func, &fargs, &fkw)) return NULL;
    PyObject *r = m_start(NULL, NULL);
    if (r == NULL) PyErr_Clear(); /* run the thread untraced rather than not at all */
    Py_XDECREF(r);
    PyObject *res = PyObject_Call(func, fargs, fkw);
    if (res == NULL) {
        if (PyErr_ExceptionMatches(PyExc_SystemExit))
            PyErr_Clear();
        else
#if PY_VERSION_HEX >= 0x030D0000
            PyErr_FormatUnraisable("Exception ignored in thread started by %R", func);
#else
            _PyErr_WriteUnraisableMsg("in thread started by", func);
#endif
        Py_RETURN_NONE;
    }
    Py_DECREF(res);
    Py_RETURN_NONE;
}

static PyObject *start_new_thread(PyObject *self, PyObject *args) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (g_orig_start_new_thread == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "culprit_trace: _thread not wrapped");
        return NULL;
    }
    /* Anything unusual goes to the real function unchanged, so errors read the same. */
    if ((n != 2 && n != 3) || !PyTuple_Check(PyTuple_GET_ITEM(args, 1)) ||
        (n == 3 && !PyDict_Check(PyTuple_GET_ITEM(args, 2))) || !PyCallable_Check(PyTuple_GET_ITEM(args, 0)))
        return PyObject_Call(g_orig_start_new_thread, args, NULL);
    PyObject *inner = n == 2 ? PyTuple_Pack(2, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1))
                             : PyTuple_Pack(3, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1),
                                            PyTuple_GET_ITEM(args, 2));
    if (inner == NULL) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(g_orig_start_new_thread, g_thread_entry, inner, NULL);
    Py_DECREF(inner);
    return r;
}

static PyMethodDef thread_entry_def = {"thread_entry", thread_entry, METH_VARARGS,
                                       "Runs a new thread's function with the profile callback installed."};
static PyMethodDef start_new_thread_def = {
    "start_new_thread", start_new_thread, METH_VARARGS,
    "start_new_thread(function, args[, kwargs])\n\n_thread.start_new_thread, with Culprit's profile callback "
    "installed in the new thread."};

PyDoc_STRVAR(wrap_threads_doc,
             "wrap_threads(_thread_module, threading_module_or_None) -> bool\n\n"
             "Replaces _thread.start_new_thread (and start_new, and threading._start_new_thread when threading "
             "is already imported) so that every new thread is traced. Idempotent.");
static PyObject *m_wrap_threads(PyObject *self, PyObject *args) {
    PyObject *thr, *threading;
    if (!PyArg_ParseTuple(args, "OO", &thr, &threading)) return NULL;
    if (g_orig_start_new_thread != NULL) Py_RETURN_FALSE;
    PyObject *orig = PyObject_GetAttrString(thr, "start_new_thread");
    if (orig == NULL) return NULL;
    PyObject *modname = PyUnicode_FromString("_thread");
    PyObject *snt = modname ? PyCFunction_NewEx(&start_new_thread_def, NULL, modname) : NULL;
    PyObject *entry = PyCFunction_NewEx(&thread_entry_def, NULL, NULL);
    Py_XDECREF(modname);
    if (snt == NULL || entry == NULL) {
        Py_XDECREF(snt);
        Py_XDECREF(entry);
        Py_DECREF(orig);
        return NULL;
    }
    g_orig_start_new_thread = orig;
    g_thread_entry = entry;
    int rc = PyObject_SetAttrString(thr, "start_new_thread", snt);
    if (rc == 0 && PyObject_HasAttrString(thr, "start_new")) rc = PyObject_SetAttrString(thr, "start_new", snt);
    if (rc == 0 && threading != Py_None) {
        PyObject *cur = PyObject_GetAttrString(threading, "_start_new_thread");
        if (cur == NULL)
            PyErr_Clear();
        else {
            if (cur == orig) rc = PyObject_SetAttrString(threading, "_start_new_thread", snt);
            Py_DECREF(cur);
        }
    }
    Py_DECREF(snt);
    if (rc != 0) return NULL;
    Py_RETURN_TRUE;
}


PyDoc_STRVAR(call_traced_doc,
             "call_traced(func, args) -> result\n\n"
             "Calls func(*args) with a fresh profile callback on the calling thread and removes it "
             "afterwards. The frames already running (the caller's) are not recorded, and calls "
             "made by func are roots of the trace, as when the interpreter runs a program: "
             "`python3 -m culprit_trace prog.py` records what `python3 prog.py` would.");
static PyObject *m_call_traced(PyObject *self, PyObject *args) {
    PyObject *func, *fargs;
    int how = 0; /* 0 profile, 1 frames, 2 monitor, 3 monitor with builtins */
    if (!PyArg_ParseTuple(args, "OO!|i", &func, &PyTuple_Type, &fargs, &how)) return NULL;
    if (ensure_ready() < 0) return NULL;
    int frames = how == 1;
    (void)frames;
#if CULPRIT_MONITORING
    if (how >= 2) {
        /* Like frames mode: the callbacks stay on afterwards (they serve every thread). */
        g_mboundary = current_iframe(PyThreadState_Get());
        if (monitor_start(how == 3) < 0) return NULL;
        int saved = t_mon.hidden;
        t_mon.hidden = 0;
        PyObject *res = PyObject_Call(func, fargs, NULL);
        t_mon.hidden = saved;
        return res;
    }
#endif
#if CULPRIT_PY311
    if (frames) {
        /* The frame-evaluation function stays installed afterwards (it serves every
         * thread); the caller's frames are hidden, so nothing of the shim is recorded. */
        PyThreadState *ts0 = PyThreadState_Get();
        g_boundary = ts0->cframe ? (const void *)ts0->cframe->current_frame : NULL;
        frames_start();
        int saved = t_suppress;
        t_suppress = 0;
        PyObject *res = PyObject_Call(func, fargs, NULL);
        t_suppress = saved;
        return res;
    }
#endif
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profilefunc == profile_cb) PyEval_SetProfile(NULL, NULL);
    PyObject *r = m_start(NULL, NULL);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    ThreadState *st = (ThreadState *)ts->c_profileobj;
#if CULPRIT_PY311
    st->boundary = ts->cframe ? (const void *)ts->cframe->current_frame : NULL;
#else
    PyFrameObject *cur = PyEval_GetFrame();
    st->boundary = cur;
#endif
    PyObject *res = PyObject_Call(func, fargs, NULL);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    uninstall_here();
    PyErr_Restore(et, ev, tb);
    return res;
}

/* ---- module functions ------------------------------------------------------------- */

static void after_fork_child(void) { g_pid = getpid(); }

static int ensure_ready(void) {
    resolve_libtrace();
    if (!lt.found) {
        PyErr_SetString(PyExc_RuntimeError,
                        "libtrace.so is not loaded in this process (culprit_emit_call not found): "
                        "run under `culprit record` or set LD_PRELOAD");
        return -1;
    }
    if (g_extra_index < 0) {
        g_extra_index = CULPRIT_REQUEST_EXTRA_INDEX(NULL);
        if (g_extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no PEP 523 code-extra slot left in this interpreter");
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(available_doc, "available() -> bool\n\nTrue if libtrace.so's C ABI is present in this process.");
static PyObject *m_available(PyObject *self, PyObject *noargs) {
    resolve_libtrace();
    return PyBool_FromLong(lt.found);
}

PyDoc_STRVAR(start_doc,
             "start() -> bool\n\nInstalls the C profile callback on the calling thread (idempotent). "
             "Returns False if it was already installed.");
static PyObject *m_start(PyObject *self, PyObject *noargs) {
    if (ensure_ready() < 0) return NULL;
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profilefunc == profile_cb) Py_RETURN_FALSE;
    ThreadState *st = PyObject_New(ThreadState, &ThreadStateType);
    if (st == NULL) return NULL;
    st->ct = lt.thread_state ? lt.thread_state() : NULL;
    st->depth = 0;
    st->events = 0;
    st->boundary = NULL;
    st->chained = NULL;
    /* A profile function set with sys.setprofile before (its object is what
     * sys.getprofile returns) keeps being called, after our recording. */
    if (ts->c_profilefunc != NULL && ts->c_profileobj != NULL && PyCallable_Check(ts->c_profileobj) &&
        !PyObject_TypeCheck(ts->c_profileobj, &ThreadStateType)) {
        Py_INCREF(ts->c_profileobj);
        st->chained = ts->c_profileobj;
    }
    PyEval_SetProfile(profile_cb, (PyObject *)st);
    Py_DECREF(st); /* the thread state holds the reference */

    Py_RETURN_TRUE;
}

PyDoc_STRVAR(stop_doc, "stop()\n\nRemoves the callback from the calling thread if it is installed.");
static PyObject *m_stop(PyObject *self, PyObject *noargs) {
    uninstall_here();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(active_doc, "active() -> bool\n\nTrue if the callback is installed on the calling thread.");
static PyObject *m_active(PyObject *self, PyObject *noargs) {
    return PyBool_FromLong(PyThreadState_Get()->c_profilefunc == profile_cb);
}

PyDoc_STRVAR(flush_doc, "flush()\n\nPublishes the calling thread's current sub-buffer (culprit_flush_thread).");
static PyObject *m_flush(PyObject *self, PyObject *noargs) {
    resolve_libtrace();
    if (lt.flush_thread) lt.flush_thread();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(stats_doc,
             "stats() -> dict\n\nIndices assigned, code records written, and whether the inline fast path is used.");
static PyObject *m_stats(PyObject *self, PyObject *noargs) {
    PyThreadState *ts = PyThreadState_Get();
    unsigned long long ev = 0;
    if (ts->c_profilefunc == profile_cb && ts->c_profileobj) ev = ((ThreadState *)ts->c_profileobj)->events;
    return Py_BuildValue("{s:I,s:K,s:O,s:O,s:K}", "indices", (unsigned)(g_next_index - 1), "code_records",
                         (unsigned long long)g_codes_recorded, "fast_path", lt.fast ? Py_True : Py_False,
                         "libtrace", lt.found ? Py_True : Py_False, "thread_events", ev);
}

#include "greenlets.h"

static PyMethodDef methods[] = {
    {"available", m_available, METH_NOARGS, available_doc},
    {"start", m_start, METH_NOARGS, start_doc},
    {"stop", m_stop, METH_NOARGS, stop_doc},
    {"active", m_active, METH_NOARGS, active_doc},
    {"flush", m_flush, METH_NOARGS, flush_doc},
    {"stats", m_stats, METH_NOARGS, stats_doc},
    {"wrap_threads", m_wrap_threads, METH_VARARGS, wrap_threads_doc},
    {"call_traced", m_call_traced, METH_VARARGS, call_traced_doc},
    {"thread_entry", thread_entry, METH_VARARGS, "thread_entry(func, args[, kwargs]): runs func traced (profile mode)."},
    {"start_frames", m_start_frames, METH_NOARGS, start_frames_doc},
    {"stop_frames", m_stop_frames, METH_NOARGS, stop_frames_doc},
    {"start_monitor", m_start_monitor, METH_VARARGS, start_monitor_doc},
    {"stop_monitor", m_stop_monitor, METH_NOARGS, stop_monitor_doc},
    {"hide", m_hide, METH_O, hide_doc},
    {"pass_through", m_pass_through, METH_O, pass_through_doc},
    {"watch_greenlets", m_watch_greenlets, METH_O, watch_greenlets_doc},
    {"wrap_sys", m_wrap_sys, METH_O, wrap_sys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "culprit_trace._native",
    "C profile callback of Culprit's Python tracing shim (see python-hook/README.md).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ThreadStateType) < 0) return NULL;
    static int atfork_done;
    if (!atfork_done) {
        g_pid = getpid();
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_done = 1;
    }
    static const char *names[8] = {"call", "exception", "line", "return", "c_call", "c_exception", "c_return", "opcode"};
    for (int i = 0; i < 8; i++)
        if (g_event_names[i] == NULL && (g_event_names[i] = PyUnicode_InternFromString(names[i])) == NULL) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "PY311_INTERNALS", CULPRIT_PY311) < 0) return NULL;
    if (PyModule_AddIntConstant(m, "MONITORING", CULPRIT_MONITORING) < 0) return NULL;
    return m;
}
