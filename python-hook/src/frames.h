/* Part of native.c (culprit_trace._native): frames mode (PEP 523, CULPRIT_PY_MODE=frames).
 * Included once, in this order, by native.c (one translation unit: every function stays
 * static and inlinable); not a standalone header. */

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
