"""Loading df's shared libraries with ctypes, and turning df_status values
into Python exceptions.

Search order for ``libdf.so`` / ``libdf_compiler.so``: the directory named by
the ``DF_LIB_DIR`` environment variable (only there, when it is set), else the
build tree of the checkout this package sits in (``build/lib/Shared``), else
next to the package (``dataflow/`` or ``dataflow/lib/``, where an installer
may copy them). ``libdfrt.so`` (the runtime, optional) is looked up only in
``DF_RT_LIB_DIR`` when that is set, else in ``DF_LIB_DIR``, its parent (the
build tree's ``lib/``, where lib/Runtime/cuda puts it), ``build/lib`` and
next to the package.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from . import _ctypes as C

__all__ = [
    "DataflowError",
    "DataflowValueError",
    "DataflowFormatError",
    "DataflowTimeoutError",
    "lib",
    "compiler",
    "runtime",
    "check",
    "capture",
]


class DataflowError(Exception):
    """A failure reported by df's C code; ``code`` is the df_code name."""

    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message)
        self.message = message
        self.code = code


class DataflowValueError(DataflowError, ValueError):
    """The input breaks a rule of df's model or ABI (DF_EINVAL / DF_EUNSUPPORTED)."""


class DataflowFormatError(DataflowValueError):
    """Bytes that are not a well-formed df artefact (DF_EFORMAT)."""


class DataflowTypeError(DataflowError, TypeError):
    """A value of the wrong kind (reported by df's JSON readers)."""


class DataflowInternalError(DataflowError, RuntimeError):
    """An invariant of df itself failed (DF_EINTERNAL)."""


class DataflowTimeoutError(DataflowError, TimeoutError):
    """A launch did not finish within the watchdog's time (DF_ETIMEOUT)."""


_CODES = {1: "invalid", 2: "unsupported", 3: "nomem", 4: "io", 5: "format", 6: "internal",
          7: "timeout"}
# Messages of df's readers that reject the kind of a value, not its content.
_TYPE_FRAGMENTS = ("must be an int, got", "must be a string, got", "must be a list, got",
                   "must be a JSON object, got", "must be an int or None, got")


def error_for(status: C.df_status, prefix: str | None = None) -> Exception:
    message = status.message.decode("utf-8", "replace")
    if prefix:
        message = f"{prefix}: {message}"
    code = _CODES.get(status.code, "internal")
    if status.code == 3:
        return MemoryError(message)
    if status.code == 4:
        return OSError(message)
    if status.code == 5:
        return DataflowFormatError(message, code)
    if status.code == 6:
        return DataflowInternalError(message, code)
    if status.code == 7:
        return DataflowTimeoutError(message, code)
    if any(fragment in message for fragment in _TYPE_FRAGMENTS):
        return DataflowTypeError(message, code)
    return DataflowValueError(message, code)


def check(status: C.df_status, prefix: str | None = None) -> None:
    """Raise the exception matching a failed df_status."""
    if status.code != 0:
        raise error_for(status, prefix)


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def _search_dirs(kind: str) -> list[Path]:
    env = os.environ.get("DF_LIB_DIR")
    here = _package_dir()
    repo = here.parent.parent
    if kind == "runtime":
        rt_env = os.environ.get("DF_RT_LIB_DIR")
        if rt_env:
            return [Path(rt_env)]
        dirs = []
        if env:
            dirs += [Path(env), Path(env).parent]
        return dirs + [repo / "build" / "lib", here, here / "lib"]
    if env:
        return [Path(env)]
    return [repo / "build" / "lib" / "Shared", here, here / "lib"]


def _find(name: str, kind: str) -> Path | None:
    for d in _search_dirs(kind):
        candidate = d / name
        if candidate.is_file():
            return candidate
    return None


class _Loader:
    """Loads a library on first use so importing the package never fails
    for want of an optional library."""

    def __init__(self, name: str, kind: str, declare):
        self._name = name
        self._kind = kind
        self._declare = declare
        self._dll = None
        self._error: str | None = None

    def available(self) -> bool:
        try:
            self.load()
        except OSError:
            return False
        return True

    def load(self):
        if self._dll is not None:
            return self._dll
        if self._error is not None:
            raise OSError(self._error)
        path = _find(self._name, self._kind)
        if path is None:
            where = ", ".join(str(d) for d in _search_dirs(self._kind))
            self._error = (f"df: cannot find {self._name} (looked in {where}); build df "
                           f"(ninja -C build) or set DF_LIB_DIR to the folder holding it")
            raise OSError(self._error)
        dll = ctypes.CDLL(str(path))
        self._declare(dll)
        self._dll = dll
        return dll

    @property
    def path(self) -> Path | None:
        return _find(self._name, self._kind)

    def __getattr__(self, item):
        return getattr(self.load(), item)


lib = _Loader("libdf.so", "core", C.declare_core)
compiler = _Loader("libdf_compiler.so", "core", C.declare_compiler)
runtime = _Loader("libdfrt.so", "runtime", C.declare_runtime)


def _libc():
    return ctypes.CDLL(None)


def capture(fn, *args) -> str:
    """Run a df function that writes to a ``FILE *`` (its last argument) and
    return what it wrote."""
    libc = _libc()
    libc.open_memstream.restype = ctypes.c_void_p
    libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.POINTER(ctypes.c_size_t)]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.free.argtypes = [ctypes.c_void_p]
    buf = ctypes.c_void_p()
    size = ctypes.c_size_t()
    stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not stream:
        raise OSError("df: open_memstream failed")
    try:
        status = fn(*args, stream)
    finally:
        libc.fclose(stream)
    try:
        text = ctypes.string_at(buf, size.value).decode("utf-8", "replace") if buf else ""
    finally:
        libc.free(buf)
    check(status)
    return text
