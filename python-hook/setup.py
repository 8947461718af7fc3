"""Build of culprit_trace: the Python package, its C extension and the .pth start-up hook.

    pip install ./python-hook          # from the workspace root

The extension includes libtrace.so's C ABI header from ../tracer-preload/include (the
single definition of that contract), so build from a checkout of the workspace, not
from an sdist. `culprit_trace.pth` is copied to the root of site-packages: it makes
every Python process started under `culprit record` trace itself (see README.md).
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ABI_DIR = os.path.join(HERE, "..", "tracer-preload", "include")


class build_py_with_pth(build_py):
    """Also puts culprit_trace.pth at the root of the build (= of site-packages)."""

    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, "culprit_trace.pth"),
                       os.path.join(self.build_lib, "culprit_trace.pth"))


if not os.path.exists(os.path.join(ABI_DIR, "culprit.h")):
    raise SystemExit("culprit_trace: %s/culprit.h not found; build from the Culprit workspace "
                     "(pip install ./python-hook)" % ABI_DIR)

setup(
    name="culprit_trace",
    version="0.1.0",
    description="Culprit's Python tracing shim: records calls, returns, exceptions and builtin "
                "calls into libtrace.so's shared-memory pool",
    packages=["culprit_trace"],
    ext_modules=[
        Extension(
            "culprit_trace._native",
            sources=["src/native.c"],
            # native.c's parts (one translation unit, included in order)
            depends=["src/%s" % h for h in ("emit.h", "codes.h", "profile.h", "frames.h",
                                            "monitor.h", "chain.h", "greenlets.h")],
            include_dirs=[ABI_DIR],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wno-missing-field-initializers"],
            libraries=["dl"],
        )
    ],
    cmdclass={"build_py": build_py_with_pth},
    python_requires=">=3.8",
    zip_safe=False,
)
