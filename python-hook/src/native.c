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
 * Layout: one translation unit, in parts included in this order — emit.h (libtrace
 * symbols, per-thread state, the inline append, the clock); codes.h (the index table:
 * code objects, builtins); profile.h (the profile callback, profile mode, and exception
 * types); frames.h (the frame-evaluation function, CULPRIT_PY_MODE=frames); monitor.h
 * (sys.monitoring, CULPRIT_PY_MODE=monitor); chain.h (the program's own sys.setprofile
 * chained behind the callback; threads); then this file's module functions, after
 * greenlets.h (greenlet switches).
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

#include "emit.h"
#include "codes.h"
#include "profile.h"
#include "frames.h"
#include "monitor.h"
#include "chain.h"

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
