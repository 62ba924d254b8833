"""The external compilers ``df.compile`` drives for C handler sources:
clang-22 for nvptx64 bitcode (linked into the PTX by libdf_compiler) and
the host C compiler for the shared object the host backend loads.

Overrides: ``DF_CLANG`` (the device compiler), ``DF_HOST_CC`` or ``CC``
(the host compiler, default ``cc``), ``DF_INCLUDE_DIR`` (the folder holding
``df/device.h``; default: this checkout's ``include/``)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from ._lib import DataflowError

__all__ = ["DataflowCompileError", "find_clang", "host_cc", "include_dir", "device_bitcode",
           "host_bitcode", "host_library", "DEVICE_FLAGS"]

# As lib/Runtime/device/CMakeLists.txt compiles the device runtime.
DEVICE_FLAGS = ("--target=nvptx64-nvidia-cuda", "-nogpulib", "-nostdlibinc",
                "-fconvergent-functions", "-O2", "-std=gnu17")
HOST_FLAGS = ("-shared", "-fPIC", "-O2", "-std=gnu17")
# C handlers linked with MLIR bodies into one host object (df_emit_host_handlers).
HOST_BITCODE_FLAGS = ("-fPIC", "-O2", "-std=gnu17")


class DataflowCompileError(DataflowError, RuntimeError):
    """A handler source failed to compile (the compiler's output is the
    message), or a compiler is missing."""


def find_clang() -> str | None:
    env = os.environ.get("DF_CLANG")
    if env:
        return env
    for candidate in ("clang-22", "/usr/lib/llvm-22/bin/clang"):
        path = shutil.which(candidate)
        if path:
            return path
    return None


def host_cc() -> list:
    return shlex.split(os.environ.get("DF_HOST_CC") or os.environ.get("CC") or "cc")


def include_dir() -> Path:
    env = os.environ.get("DF_INCLUDE_DIR")
    here = Path(__file__).resolve().parent
    candidates = [Path(env)] if env else [here.parent.parent / "include", here / "include"]
    for c in candidates:
        if (c / "df" / "device.h").is_file():
            return c
    raise DataflowCompileError(f"df: cannot find df/device.h (looked in "
                               f"{', '.join(str(c) for c in candidates)}); set DF_INCLUDE_DIR",
                               "io")


def _run(argv: list, what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except OSError as err:
        raise DataflowCompileError(f"{what}: cannot run {argv[0]}: {err}", "io") from None
    if done.returncode != 0:
        raise DataflowCompileError(f"{what} failed ({shlex.join(argv)}):\n"
                                   f"{done.stderr.strip() or done.stdout.strip()}", "invalid")


def device_bitcode(source: Path, sm: str, out_dir: Path) -> Path:
    """Compile a C handler source to nvptx64 bitcode for ``sm``."""
    clang = find_clang()
    if clang is None:
        raise DataflowCompileError("df.compile: C handler sources need clang-22 for nvptx64 "
                                   "(not found; set DF_CLANG)", "unsupported")
    out = out_dir / f"{source.stem}.{sm}.bc"
    _run([clang, *DEVICE_FLAGS, f"-march={sm}", f"-I{include_dir()}", "-emit-llvm", "-c",
          str(source), "-o", str(out)], f"compiling {source} for {sm}")
    return out


def host_bitcode(source: Path, out_dir: Path) -> Path:
    """Compile a C handler source to LLVM bitcode for the host (clang-22),
    to be linked with MLIR handler bodies into the host handler object."""
    clang = find_clang()
    if clang is None:
        raise DataflowCompileError(f"df.compile: C handler source '{source}' next to MLIR "
                                   f"bodies needs clang-22 for the host backend (not found; "
                                   f"set DF_CLANG)", "unsupported")
    out = out_dir / f"{Path(source).stem}.host.bc"
    _run([clang, *HOST_BITCODE_FLAGS, f"-I{include_dir()}", "-emit-llvm", "-c", str(source),
          "-o", str(out)], f"compiling {source} for the host")
    return out


def host_library(sources: list, out_dir: Path, name: str = "handlers_host") -> Path:
    """Compile C handler sources into one shared object for the host backend."""
    out = out_dir / f"{name}.so"
    _run([*host_cc(), *HOST_FLAGS, f"-I{include_dir()}", *(str(s) for s in sources), "-o",
          str(out), "-lm"], "compiling the host handlers")
    return out
