"""The MLIR front end through libdf_compiler.so (include/df/compiler.h):
parse df IR, convert it to the program model (running df-verify's rules)
and dump it. Diagnostics are also printed to stderr by df's context."""

from __future__ import annotations

import ctypes

from . import _ctypes as C
from ._lib import capture, check, compiler, error_for, lib
from ._program import DataflowProgramError, Owned

__all__ = ["available", "program_dump_from_mlir", "program_mlir_from_mlir", "check_mlir_program"]


def available() -> bool:
    """Whether libdf_compiler.so (built with DF_ENABLE_MLIR) was found."""
    return compiler.available()


def _with_program(text: str, name: str | None, source_name: str, use):
    ctx = C.MlirContext()
    check(compiler.df_context_create(ctypes.byref(ctx)))
    try:
        data = text.encode()
        module = C.MlirOperation()
        check(compiler.df_parse_module(ctx, data, len(data), source_name.encode(),
                                       ctypes.byref(module)))
        try:
            out = ctypes.c_void_p()
            status = compiler.df_program_from_module(module, name.encode() if name else None,
                                                     None, ctypes.byref(out))
            if status.code != 0:
                raise DataflowProgramError(str(error_for(status)))
            handle = Owned(out.value, lib.df_program_destroy)
            try:
                return use(handle)
            finally:
                handle.close()
        finally:
            compiler.mlirOperationDestroy(module)
    finally:
        compiler.mlirContextDestroy(ctx)


def program_dump_from_mlir(text: str, name: str | None = None,
                           source_name: str = "<python>") -> str:
    """df_program_dump of the program in MLIR ``text`` (what
    ``df-translate --df-program-dump`` prints)."""
    return _with_program(text, name, source_name,
                         lambda h: capture(lib.df_program_dump, h.ptr))


def check_mlir_program(text: str, name: str | None = None,
                       source_name: str = "<python>") -> None:
    """Raise DataflowProgramError with df-verify's message when the program
    in ``text`` breaks a rule."""
    _with_program(text, name, source_name, lambda h: None)


def program_mlir_from_mlir(text: str, name: str | None = None,
                           source_name: str = "<python>") -> str:
    """IR -> program model -> IR: the module df_program_to_mlir builds from
    the program in ``text`` (what df-program-ir prints)."""

    def to_text(handle):
        out = ctypes.c_void_p()
        check(compiler.df_program_to_mlir_text(handle.ptr, ctypes.byref(out)))
        try:
            return ctypes.string_at(out).decode()
        finally:
            lib.df_shared_free(out)

    return _with_program(text, name, source_name, to_text)
