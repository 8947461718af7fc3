/* Part of native.c (culprit_trace._native): the profile callback (profile mode, the default before 3.12), the program's own profile function called behind it, and exception types.
 * Included once, in this order, by native.c (one translation unit: every function stays
 * static and inlinable); not a standalone header. */

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
