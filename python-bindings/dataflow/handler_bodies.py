"""Handler bodies given as MLIR text (``mlir=`` of the operator decorators),
compiled through libdf_compiler.so: the program's module is built by
``df_program_to_mlir`` and each body merged into it by
``df_module_add_handler_body`` (compile_api.h's ``df_shared_handlers_*``);
code generation lowers the merged module for the GPU (PTX) and the host
backend (a handler shared object per plan)."""

from __future__ import annotations

import ctypes
import weakref
from pathlib import Path

from ._lib import check, compiler, error_for, lib
from .toolchain import DataflowCompileError

__all__ = ["DataflowHandlerError", "HandlerModule"]


class DataflowHandlerError(DataflowCompileError):
    """An MLIR handler body was refused: it does not parse (the parser's
    message, located in ``<mlir body of NAME>``), its signature differs
    from the operator's declaration, or it is not a handler body. The
    message names the operator; ``operator`` is its name."""

    def __init__(self, message: str, code: str = "invalid", operator: str | None = None):
        super().__init__(message, code)
        self.operator = operator


def _files(paths) -> tuple:
    paths = [str(p).encode() for p in paths]
    return (ctypes.c_char_p * max(1, len(paths)))(*paths), len(paths)


class HandlerModule:
    """The program module with MLIR bodies merged in (one C
    ``df_shared_handlers``); ``bodies`` is a sequence of (operator name,
    MLIR text). The program must stay alive as long as the module."""

    def __init__(self, program, bodies):
        dll = compiler.load()
        if not hasattr(dll, "df_shared_handlers_create"):
            raise OSError(f"df: {compiler.path} predates MLIR handler bodies; rebuild it")
        self._program = program  # its C df_program backs the module
        out = ctypes.c_void_p()
        check(compiler.df_shared_handlers_create(program.c_program().ptr, ctypes.byref(out)),
              "df.compile")
        self._ptr = out.value
        self._finalizer = weakref.finalize(self, compiler.df_shared_handlers_destroy, out.value)
        self.operators = []
        for name, text in bodies:
            if not isinstance(text, str):
                raise TypeError(f"handler '{name}': mlir= takes MLIR text (a str), got "
                                f"{type(text).__name__}")
            data = text.encode()
            status = compiler.df_shared_handlers_add_mlir(self._ptr, name.encode(), data,
                                                          len(data))
            if status.code != 0:
                err = error_for(status)
                raise DataflowHandlerError(str(err), getattr(err, "code", "invalid"), name)
            self.operators.append(name)

    def text(self) -> str:
        """The merged module (generic form)."""
        out = ctypes.c_void_p()
        check(compiler.df_shared_handlers_text(self._ptr, ctypes.byref(out)))
        try:
            return ctypes.string_at(out).decode()
        finally:
            lib.df_shared_free(out)

    def emit_ptx(self, packed, sm: str, bitcode) -> str:
        """PTX of the kernel for every plan of the program: the bodies plus
        nvptx64 ``bitcode`` (C handlers)."""
        if not compiler.df_shared_has_device_runtime():
            raise DataflowCompileError("libdf_compiler.so was built without the device runtime",
                                       "unsupported")
        files, n = _files(bitcode)
        text, size = ctypes.c_void_p(), ctypes.c_size_t()
        check(compiler.df_shared_handlers_emit_ptx(self._ptr, packed.c_pointer, sm.encode(),
                                                   files, n, ctypes.byref(text),
                                                   ctypes.byref(size)), "df.compile")
        try:
            return ctypes.string_at(text, size.value).decode()
        finally:
            lib.df_shared_free(text)

    def emit_host(self, packed, output: Path, host_bitcode, cc: str | None = None) -> Path:
        """The host backend's handler library for ``packed``: the bodies
        lowered for the host plus ``host_bitcode`` (C handlers compiled for
        the host), one exported thunk per handler of the plan."""
        files, n = _files(host_bitcode)
        check(compiler.df_shared_handlers_emit_host(self._ptr, packed.c_pointer,
                                                    str(output).encode(), files, n,
                                                    cc.encode() if cc else None),
              "df.compile (host handlers)")
        return Path(output)

    def close(self) -> None:
        self._finalizer()
