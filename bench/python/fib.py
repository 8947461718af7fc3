"""Python function-call workload for tracer-overhead anchors.

    python fib.py MODE N

Runs fib(N) recursively (2*F(N+1)-1 calls of fib, computed arithmetically below) and prints
"CALLS=<calls> WORK_NS=<ns spent in fib(N)> RESULT=<fib(N)> WORK_CPU_NS=<thread CPU ns in fib(N)>".
(Culprit's copy of bench-anchors' src/fib.py; WORK_CPU_NS added: on a loaded shared
machine the thread's CPU time is steadier than the wall clock.)

MODE:
  plain           no tracing (also used when an external tracer such as viztracer runs us)
  settrace        sys.settrace(f) where f is a no-op that returns None: only the global
                  'call' event reaches Python code, no per-frame line/return events
  settrace_local  sys.settrace(f) where f returns itself: 'call', 'line' and 'return'
                  events for every frame (what coverage tools / debuggers pay)
  setprofile      sys.setprofile(f) with a no-op f: 'call' and 'return' events
                  (plus c_call/c_return for builtins, none inside fib)
  count           setprofile hook that counts call/return events of fib (verification)
"""
import sys
import time


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def fib_calls(n):
    a, b = 0, 1  # F(0), F(1)
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1  # a == F(n+1)


def _noop_global(frame, event, arg):
    return None


def _noop_local(frame, event, arg):
    return _noop_local


def _noop_profile(frame, event, arg):
    pass


_counts = {"call": 0, "return": 0}


def _count_profile(frame, event, arg):
    if frame.f_code is fib.__code__ and event in _counts:
        _counts[event] += 1


def main():
    mode = sys.argv[1]
    n = int(sys.argv[2])
    if mode == "settrace":
        sys.settrace(_noop_global)
    elif mode == "settrace_local":
        sys.settrace(_noop_local)
    elif mode == "setprofile":
        sys.setprofile(_noop_profile)
    elif mode == "count":
        sys.setprofile(_count_profile)
    elif mode != "plain":
        raise SystemExit("unknown mode " + mode)
    c0 = time.thread_time_ns()
    t0 = time.perf_counter_ns()
    r = fib(n)
    t1 = time.perf_counter_ns()
    c1 = time.thread_time_ns()
    sys.settrace(None)
    sys.setprofile(None)
    print("CALLS=%d WORK_NS=%d RESULT=%d WORK_CPU_NS=%d" % (fib_calls(n), t1 - t0, r, c1 - c0))
    if mode == "count":
        print("COUNTED_CALL=%d COUNTED_RETURN=%d" % (_counts["call"], _counts["return"]))
        if _counts["call"] != fib_calls(n) or _counts["return"] != fib_calls(n):
            raise SystemExit("call count mismatch")


if __name__ == "__main__":
    main()
