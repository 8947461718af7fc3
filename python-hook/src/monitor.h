/* Part of native.c (culprit_trace._native): monitoring mode (PEP 669, CPython 3.12+).
 * Included once, in this order, by native.c (one translation unit: every function stays
 * static and inlinable); not a standalone header. */

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
