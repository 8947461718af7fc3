/*
 * greenlets.h — greenlet switches as suspensions and resumptions (included once, by
 * native.c, after the per-thread states and the emit functions).
 *
 * A greenlet (gevent, eventlet) is a Python call stack of its own; switching greenlets swaps
 * the thread's whole stack, and no profile event says so: the frames of the greenlet
 * switched out simply stop, those of the one switched in go on, and their returns arrive
 * for calls the thread's entries last showed under another greenlet's. A thread's entries
 * would then not nest, and the analysis would mix the requests of every greenlet on it.
 *
 * So the shim reports a switch as CPython's own profiler reports a coroutine that yields and
 * is resumed: the open calls of the greenlet switched out return (PyReturn / PyCReturn with
 * aux = 2, "suspended"), and those of the one switched in are called again (PyCall /
 * PyCCall with the sites they were first called from), outermost first. Between two
 * switches the thread's entries are then those of one greenlet, and they nest.
 *
 * How. Once the program has imported `greenlet` (culprit_trace/_greenlets.py calls
 * watch_greenlets(greenlet.settrace)), every thread that records a call keeps its open
 * calls on a shadow stack (GlThread, one heap block per thread reached through an
 * initial-exec TLS pointer) and installs gl_switched as its greenlet trace function, the
 * program's own one chained behind it. On a switch (greenlet calls it after the switch,
 * in the target's context) the origin's open calls are emitted as suspended and saved
 * under the origin's address; the target's saved calls, if any, are emitted and become the
 * shadow stack. A greenlet switched in with no Python frame running has nothing to resume:
 * a saved block under its address belonged to a greenlet that died suspended at the same
 * address, and is dropped.
 *
 * Bounds. The shadow stack holds up to GL_MAX_OPEN calls; deeper calls are counted, not
 * kept, and stay open across switches in the entries. Calls already running when the
 * program imported greenlet are not on it and stay open beneath every greenlet. The pure-
 * Python fallback tracer does not follow greenlets.
 */

#define GL_MAX_OPEN 4096

typedef struct {
    uint64_t site;   /* the PyCall / PyCCall caller field */
    uint64_t callee; /* code or builtin index */
    uint8_t kind;    /* K_PYCALL or K_PYCCALL */
} GlCall;

typedef struct {
    GlCall *v;
    int len, cap;
    long over;          /* calls open above v[len-1] that the bound kept out */
    int replaying;      /* >0 while gl_switched emits: not pushed or popped */
    PyObject *chained;  /* the greenlet trace function installed before ours, or NULL */
} GlThread;

static PyObject *g_gl_settrace;     /* greenlet.settrace */
static PyObject *g_gl_saved;        /* {address of a suspended greenlet: bytes of its calls} */
static PyObject *g_gl_callback;     /* gl_switched as a Python callable */
static __thread GlThread *t_gl __attribute__((tls_model("initial-exec")));
static pthread_key_t g_gl_key;      /* frees a thread's GlThread when it exits */

static void gl_free(void *p) {
    GlThread *g = p;
    free(g->v);
    free(g); /* g->chained is leaked: no GIL here to release it */
}

/* This thread's shadow stack, made (and gl_switched installed as its greenlet trace
 * function) on first use. NULL when it cannot be made: the thread is then not followed. */
static GlThread *gl_thread(void) {
    GlThread *g = t_gl;
    if (g != NULL) return g;
    g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    t_gl = g;
    (void)pthread_setspecific(g_gl_key, g);
    if (g_gl_settrace != NULL && g_gl_callback != NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        g->replaying++;
        PyObject *old = PyObject_CallOneArg(g_gl_settrace, g_gl_callback);
        g->replaying--;
        if (old == NULL) {
            PyErr_Clear();
        } else if (old == Py_None) {
            Py_DECREF(old);
        } else {
            g->chained = old;
        }
        PyErr_Restore(type, value, tb);
    }
    return g;
}

static int gl_reserve(GlThread *g, int n) {
    if (n <= g->cap) return 1;
    int cap = g->cap ? g->cap : 64;
    while (cap < n) cap *= 2;
    if (cap > GL_MAX_OPEN) cap = GL_MAX_OPEN;
    if (cap < n) return 0;
    GlCall *v = realloc(g->v, (size_t)cap * sizeof *v);
    if (v == NULL) return 0;
    g->v = v;
    g->cap = cap;
    return 1;
}

static void gl_pushed(uint8_t kind, uint64_t site, uint64_t callee) {
    if (kind != K_PYCALL && kind != K_PYCCALL) return;
    GlThread *g = gl_thread();
    if (g == NULL || g->replaying) return;
    if (g->over > 0 || !gl_reserve(g, g->len + 1)) {
        g->over++;
        return;
    }
    g->v[g->len++] = (GlCall){site, callee, kind};
}

static void gl_popped(uint8_t kind) {
    if (kind != K_PYRETURN && kind != K_PYCRETURN) return;
    GlThread *g = t_gl;
    if (g == NULL || g->replaying) return;
    if (g->over > 0)
        g->over--;
    else if (g->len > 0)
        g->len--;
}

/* Adds `delta` to the thread's count of recorded open calls (profile and monitoring
 * modes guard returns with it). */
static void gl_depth_add(long delta) {
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profileobj != NULL && Py_TYPE(ts->c_profileobj) == &ThreadStateType)
        ((ThreadState *)ts->c_profileobj)->depth += delta;
#if CULPRIT_MONITORING
    t_mon.depth += delta;
#endif
}

/* The block saved for a suspended greenlet: `over`, then its calls, outermost first. */
static PyObject *gl_pack(const GlThread *g) {
    size_t n = sizeof(long) + (size_t)g->len * sizeof(GlCall);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (b == NULL) return NULL;
    char *p = PyBytes_AS_STRING(b);
    memcpy(p, &g->over, sizeof(long));
    if (g->len > 0) memcpy(p + sizeof(long), g->v, (size_t)g->len * sizeof(GlCall));
    return b;
}

static void gl_switch(GlThread *g, PyObject *origin, PyObject *target) {
    struct culprit_thread *ct = lt.thread_state ? lt.thread_state() : NULL;
    int was = g->len;
    g->replaying++;
    for (int i = g->len - 1; i >= 0; i--)
        emit_return(ct, g->v[i].kind == K_PYCALL ? K_PYRETURN : K_PYCRETURN, g->v[i].callee, 2);
    PyObject *key = PyLong_FromVoidPtr(origin);
    if (key != NULL) {
        if (g->len > 0 || g->over > 0) {
            PyObject *b = gl_pack(g);
            if (b == NULL || PyDict_SetItem(g_gl_saved, key, b) < 0) PyErr_Clear();
            Py_XDECREF(b);
        } else if (PyDict_DelItem(g_gl_saved, key) < 0) {
            PyErr_Clear();
        }
        Py_DECREF(key);
    } else {
        PyErr_Clear();
    }
    g->len = 0;
    g->over = 0;
    key = PyLong_FromVoidPtr(target);
    PyObject *b = key != NULL ? PyDict_GetItemWithError(g_gl_saved, key) : NULL;
    if (b != NULL) {
        Py_INCREF(b);
        if (PyDict_DelItem(g_gl_saved, key) < 0) PyErr_Clear();
        Py_ssize_t size = PyBytes_Check(b) ? PyBytes_GET_SIZE(b) : 0;
        int n = size >= (Py_ssize_t)sizeof(long) ? (int)((size - (Py_ssize_t)sizeof(long)) / (Py_ssize_t)sizeof(GlCall)) : -1;
        /* Python frames run in the target unless it is starting or runs only C code: with
         * none, the block is a dead greenlet's. */
        if (n >= 0 && PyEval_GetFrame() != NULL && gl_reserve(g, n)) {
            const char *p = PyBytes_AS_STRING(b);
            memcpy(&g->over, p, sizeof(long));
            if (n > 0) memcpy(g->v, p + sizeof(long), (size_t)n * sizeof(GlCall));
            g->len = n;
            for (int i = 0; i < n; i++) emit_call(ct, g->v[i].kind, g->v[i].site, g->v[i].callee);
        }
        Py_DECREF(b);
    }
    Py_XDECREF(key);
    PyErr_Clear();
    g->replaying--;
    gl_depth_add((long)g->len - was);
}

/* The greenlet trace function: callback(event, (origin, target)), event "switch" or
 * "throw". Calls the program's own one after recording. */
static PyObject *gl_switched(PyObject *self, PyObject *args) {
    (void)self;
    GlThread *g = t_gl;
    if (g != NULL && !g->replaying && PyTuple_Check(args) && PyTuple_GET_SIZE(args) == 2) {
        PyObject *pair = PyTuple_GET_ITEM(args, 1);
        int on = lt.global_enabled == NULL || __atomic_load_n(lt.global_enabled, __ATOMIC_RELAXED);
        if (on && PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 &&
            PyTuple_GET_ITEM(pair, 0) != PyTuple_GET_ITEM(pair, 1)) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            gl_switch(g, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
            PyErr_Restore(type, value, tb);
        }
    }
    if (g != NULL && g->chained != NULL) return PyObject_Call(g->chained, args, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef gl_switched_def = {"greenlet_switched", gl_switched, METH_VARARGS,
                                      "greenlet_switched(event, (origin, target)): the greenlet "
                                      "trace function of the shim (greenlets.h)."};

PyDoc_STRVAR(watch_greenlets_doc,
             "watch_greenlets(settrace)\n\nFollows greenlet switches from now on (greenlets.h): "
             "settrace is greenlet.settrace.");
static PyObject *m_watch_greenlets(PyObject *self, PyObject *settrace) {
    (void)self;
    if (g_greenlets) Py_RETURN_NONE;
    if (!PyCallable_Check(settrace)) {
        PyErr_SetString(PyExc_TypeError, "watch_greenlets: settrace must be callable");
        return NULL;
    }
    if (pthread_key_create(&g_gl_key, gl_free) != 0) return PyErr_NoMemory();
    g_gl_saved = PyDict_New();
    g_gl_callback = PyCFunction_NewEx(&gl_switched_def, NULL, NULL);
    if (g_gl_saved == NULL || g_gl_callback == NULL) {
        Py_CLEAR(g_gl_saved);
        Py_CLEAR(g_gl_callback);
        return NULL;
    }
    Py_INCREF(settrace);
    g_gl_settrace = settrace;
    g_greenlets = 1;
    /* This thread is followed from now on; other threads from their next recorded call. */
    if (gl_thread() == NULL) return PyErr_NoMemory();
    Py_RETURN_NONE;
}
