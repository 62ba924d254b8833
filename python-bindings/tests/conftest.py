"""Test set-up: the bindings are imported from python-bindings/ (no install
needed); DF_LIB_DIR names the build's lib/Shared (scripts/test.sh sets it).
Tests marked ``needs_dfrt`` use libdfrt (lib/Runtime) and skip cleanly when
it was not built; ``needs_compiler`` ones need libdf_compiler.so."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_dfrt: needs libdfrt.so (lib/Runtime/cuda)")
    config.addinivalue_line("markers", "needs_compiler: needs libdf_compiler.so (MLIR)")
    config.addinivalue_line("markers", "needs_gpu: needs a CUDA GPU")


def pytest_collection_modifyitems(config, items):
    from dataflow import _lib

    skips = {
        "needs_dfrt": (_lib.runtime.available,
                       "libdfrt.so not found (build lib/Runtime/cuda or set DF_LIB_DIR)"),
        "needs_compiler": (_lib.compiler.available,
                           "libdf_compiler.so not found (configure with DF_ENABLE_MLIR=ON)"),
        "needs_gpu": (_has_gpu, "no CUDA GPU"),
    }
    for item in items:
        for marker, (available, reason) in skips.items():
            if item.get_closest_marker(marker) and not available():
                item.add_marker(pytest.mark.skip(reason=reason))


def _has_gpu() -> bool:
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and \
        count.value > 0
