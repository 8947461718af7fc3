/* Part of native.c (culprit_trace._native): the index table: code objects and builtins to CodeInfo (names recorded on first use in a process), and the call sites of frames.
 * Included once, in this order, by native.c (one translation unit: every function stays
 * static and inlinable); not a standalone header. */

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
