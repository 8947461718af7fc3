/* Part of native.c (culprit_trace._native): the program's own sys.setprofile kept working behind the shim, and new threads started traced.
 * Included once, in this order, by native.c (one translation unit: every function stays
 * static and inlinable); not a standalone header. */

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
