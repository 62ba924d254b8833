"""``df.compile``: a program, its C handlers and concrete range lengths
become a CompiledArtifact holding the persistent kernel as PTX (lib/Target
through libdf_compiler.so, with the embedded device runtime), the packed
plan and its blob, and a host build of the handlers for the host backend.
``artifact.launch`` runs it through libdfrt on a CUDA GPU, or on the host
backend when there is no CUDA driver; new range lengths re-plan."""

from __future__ import annotations

import ctypes
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ._lib import DataflowValueError, check, compiler, lib
from ._program import DataflowProgram
from .packing import PackedInstructionPlan, pack_instruction_plan
from .plan import InstructionPlan
from .schedule import schedule, schedule_options
from .tensors import bind_tensors
from .handler_bodies import HandlerModule
from .toolchain import DataflowCompileError, device_bitcode, host_bitcode, host_cc, host_library

__all__ = ["compile", "CompiledArtifact", "LaunchResult", "TARGETS"]

TARGETS = ("sm_90a", "sm_90", "sm_80", "host")
_PLAN_CACHE = 8  # re-planned (plan, packed) pairs kept per artifact


@dataclass(frozen=True)
class LaunchResult:
    """What one launch did: the backend ("cuda" or "host"), the range
    lengths it ran with, whether it re-planned, and for the host backend its
    statistics (steps, op_count, makespan_cycles, op_log, cost)."""

    backend: str
    range_lengths: Mapping[str, tuple]
    replanned: bool
    device: str
    host: Any = None


def _lengths_key(range_lengths: Mapping) -> tuple:
    if not isinstance(range_lengths, Mapping):
        raise TypeError("range_lengths must be a mapping of range axis -> lengths")
    key = []
    for axis, value in range_lengths.items():
        items = (value,) if isinstance(value, int) else tuple(value)
        for v in items:
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"range_lengths['{axis}'] must contain ints, got {v!r}")
        key.append((str(axis), items))
    return tuple(sorted(key))


def _mlir_bodies(program: DataflowProgram) -> list:
    """(operator or implementation name, MLIR text) of the operators and
    implementations declared with ``mlir=``."""
    bodies = [(op.name, op.body.value) for op in program.operators()
              if op.body is not None and op.body.kind == "mlir"]
    return bodies + [(im.name, im.mlir) for op in program.operators()
                     for im in op.implementations if im.mlir is not None]


def _uses_module(program: DataflowProgram, replacements) -> bool:
    """Whether code generation needs the program module: built-in library
    handlers (their wrappers read the program), implementations to choose
    among, or MLIR bodies."""
    return bool(replacements) or any(
        op.library is not None or op.implementations or
        (op.body is not None and op.body.kind == "mlir") for op in program.operators())


def _handler_files(program: DataflowProgram, handlers,
                   replacements=()) -> tuple[list, list, list]:
    """(C sources, bitcode files, host shared objects) from ``handlers`` or,
    when None, from the operators' declared file bodies (``source=``); the
    sources of declared implementations and of replacement Implementation
    objects are always added."""
    from .language import Implementation

    if handlers is None:
        handlers = []
        for op in program.operators():
            if op.body is None or op.body.kind in ("mlir", "library"):
                continue
            handlers.append(op.body.value)
    elif isinstance(handlers, (str, Path)):
        handlers = [handlers]
    else:
        handlers = list(handlers)
    if isinstance(replacements, (str, Implementation)):
        replacements = [replacements]
    impls = [im for op in program.operators() for im in op.implementations]
    replaced = [r for r in replacements or () if isinstance(r, Implementation)]
    for r in replaced:
        if r.mlir is not None:
            raise DataflowCompileError(
                f"replacement '{r.name}' of '{r.operator_name}': a replacement's body comes "
                f"from source= or the handler files (MLIR bodies merge into the program "
                f"module, where only declared implementations live)", "unsupported")
    impls += replaced
    handlers += [im.source for im in impls if im.source is not None]
    sources, bitcode, shared = [], [], []
    for h in handlers:
        path = Path(h)
        if not path.is_file():
            raise DataflowCompileError(f"df.compile: handler file '{path}' does not exist", "io")
        bucket = {".c": sources, ".bc": bitcode, ".ll": bitcode, ".so": shared}.get(path.suffix)
        if bucket is None:
            raise DataflowCompileError(f"df.compile: '{path}' is not a C source (.c), bitcode "
                                       f"(.bc/.ll) or a host shared object (.so)", "invalid")
        if path.resolve() not in bucket:
            bucket.append(path.resolve())
    return sources, bitcode, shared


def emit_ptx(packed: PackedInstructionPlan, sm: str, bitcode: list,
             program: DataflowProgram | None = None) -> str:
    """PTX of the persistent kernel for ``packed`` with handler bitcode
    (df_emit_ptx with the device runtime embedded in libdf_compiler.so);
    ``program`` gives the handlers' workspace (docs/workspace.md)."""
    if not hasattr(compiler.load(), "df_shared_emit_ptx"):
        raise OSError(f"df: {compiler.path} predates df_shared_emit_ptx; rebuild it")
    if not compiler.df_shared_has_device_runtime():
        raise DataflowCompileError("libdf_compiler.so was built without the device runtime",
                                   "unsupported")
    files = (ctypes.c_char_p * max(1, len(bitcode)))(*[str(b).encode() for b in bitcode])
    text, size = ctypes.c_void_p(), ctypes.c_size_t()
    c_program = program.c_program().ptr if program is not None else None
    check(compiler.df_shared_emit_ptx(packed.c_pointer, c_program, sm.encode(), files,
                                      len(bitcode),
                                      ctypes.byref(text), ctypes.byref(size)), "df.compile")
    try:
        return ctypes.string_at(text, size.value).decode()
    finally:
        lib.df_shared_free(text)


def compile(program: DataflowProgram, target: str = "sm_90a", *, handlers=None,
            range_lengths: Mapping, topology, block_size: int, work_dir=None, ptx=None,
            arch: str | None = None, replacements=None,
            **schedule_kwargs) -> "CompiledArtifact":
    """Schedule and pack ``program`` for ``range_lengths`` (``schedule``'s
    keyword arguments) and compile it for ``target`` ("sm_90a", "sm_90", or
    "host" for the host backend only). ``handlers``: C sources (compiled
    with clang-22 for nvptx64 and with the host C compiler), nvptx64 bitcode
    (.bc/.ll) and host shared objects (.so); default: the sources the
    operators were declared with (``source=``). Bodies declared as MLIR
    text (``mlir=``) are always compiled: merged into the program's module
    (a bad body raises DataflowHandlerError naming the operator) and
    lowered with the rest. Operators given as a built-in library handler
    (``library=``) get df's wrapper around it. When the program declares
    implementations (``T.implementation``) or uses built-in handlers, the
    scheduler selects one implementation per instruction for ``arch``
    (default: the target; sm_90a for "host") among the program's and the
    ``replacements`` (``OP=SYMBOL[:region]`` strings or Implementation
    objects, which replace the program's for their operator); a refused
    selection raises DataflowValueError with df's message. "sm_80" selects
    for sm_80, but df's kernel needs sm_90, so its code generation refuses
    it (use target "host" with arch="sm_80" to run such a selection on the
    host backend). ``ptx`` (text, or a .ptx
    path) uses a kernel built elsewhere for this plan (``df-translate
    --df-to-ptx``) instead of compiling the handlers for the GPU. Build
    products go to ``work_dir`` (default: a temporary folder removed with the
    artifact)."""
    if not isinstance(program, DataflowProgram):
        raise TypeError(f"df.compile expects a DataflowProgram, got {type(program).__name__}")
    if target not in TARGETS:
        raise DataflowValueError(f"df.compile: target must be one of {TARGETS}, got {target!r}")
    sources, bitcode, shared = _handler_files(program, handlers, replacements)
    bodies = _mlir_bodies(program)
    module = HandlerModule(program, bodies) if _uses_module(program, replacements) else None
    kwargs = dict(schedule_kwargs, topology=topology, block_size=block_size)
    if arch is None and target != "host":
        arch = target
    if arch is not None:
        kwargs["arch"] = arch
    if replacements:
        kwargs["replacements"] = replacements
    plan = schedule(program, range_lengths=dict(range_lengths), **kwargs)
    packed = pack_instruction_plan(plan)
    if ptx is not None and target == "host":
        raise DataflowValueError("df.compile: ptx= needs a GPU target, not 'host'")
    if ptx is not None and Path(str(ptx)).suffix == ".ptx" and "\n" not in str(ptx):
        ptx = Path(ptx).read_text()
    return CompiledArtifact(program, target, plan, packed, sources, bitcode, shared, kwargs,
                            dict(range_lengths), work_dir, ptx, module)


class CompiledArtifact:
    """A compiled program: ``ptx`` (None for target "host"), ``plan`` /
    ``packed`` / ``blob`` for the current range lengths, ``bitcode`` (the
    handler bitcode linked into the PTX), ``handler_module`` (the program
    module with the MLIR bodies, or None) and ``host_library`` (built on
    first use). ``launch`` runs it."""

    def __init__(self, program, target, plan, packed, sources, bitcode, shared, kwargs,
                 range_lengths, work_dir, ptx=None, handler_module=None):
        self.program = program
        # the handlers' largest workspace_bytes (docs/workspace.md): the
        # host backend gives every virtual CTA one
        self.workspace_bytes = int(lib.df_program_workspace_bytes(program.c_program().ptr))
        self.target = target
        self.sources = tuple(sources)
        self.schedule_options = dict(kwargs)
        self.block_size = kwargs["block_size"]
        if work_dir is None:
            work_dir = Path(tempfile.mkdtemp(prefix="df-compile-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(work_dir), True)
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._base_key = _lengths_key(range_lengths)
        self._key = self._base_key
        self._lengths = {self._base_key: dict(range_lengths)}
        self._plans = {self._base_key: (plan, packed)}
        # Blobs record a selection's architecture and replacements in their
        # program, so run-time re-plans from them select the same way.
        select = {k: kwargs[k] for k in ("arch", "replacements") if k in kwargs}
        selects = "replacements" in select or any(
            op.library is not None or op.implementations for op in program.operators())
        self._blob_program = program.selection_c_program(**select) if select and selects \
            else None
        self._base_blob = packed.to_blob(self._blob_program)
        self._host_library = Path(shared[0]) if shared else None
        self.handler_module = handler_module
        self._given_bitcode = tuple(bitcode)
        self._host_bitcode = None  # C sources built for the host, with MLIR bodies
        self._host_libraries: dict = {}  # lengths key -> handler object, with MLIR bodies
        self._sessions: dict = {}
        self.ptx = ptx
        self.bitcode = tuple(bitcode)
        self._device_bitcode_built = ptx is None  # sources compiled for the GPU yet
        if target != "host" and ptx is None:
            built = [device_bitcode(src, target, self.work_dir) for src in sources]
            self.bitcode = tuple(built) + self.bitcode
            self.ptx = self._emit(packed)

    def _emit(self, packed) -> str:
        if self.handler_module is not None:
            return self.handler_module.emit_ptx(packed, self.target, list(self.bitcode))
        return emit_ptx(packed, self.target, list(self.bitcode), self.program)

    # -- plans ----------------------------------------------------------------------------

    @property
    def range_lengths(self) -> dict:
        return dict(self._lengths[self._key])

    @property
    def plan(self) -> InstructionPlan:
        return self._current()[0]

    @property
    def packed(self) -> PackedInstructionPlan:
        return self._current()[1]

    @property
    def blob(self) -> bytes:
        """The plan blob (with the program) of the current range lengths."""
        return self._blob(self._key)

    def _blob(self, key) -> bytes:
        return self._base_blob if key == self._base_key else \
            self._plan_pair(key)[1].to_blob(self._blob_program)

    def _current(self) -> tuple:
        return self._plan_pair(self._key)

    def _plan_pair(self, key) -> tuple:
        """(plan, packed) for the range lengths of ``key``, scheduled on
        first use; a few are kept."""
        if key not in self._plans:
            if len(self._plans) >= _PLAN_CACHE:
                oldest = next(k for k in self._plans if k != self._base_key)
                del self._plans[oldest]
            plan = schedule(self.program, range_lengths=self._lengths[key],
                            **self.schedule_options)
            self._plans[key] = (plan, pack_instruction_plan(plan))
        return self._plans[key]

    def replan(self, range_lengths: Mapping) -> bool:
        """Make ``range_lengths`` current; True when they differ from before.
        Plans are computed on first use (by a launch or ``plan``)."""
        key = _lengths_key(range_lengths)
        changed = key != self._key
        self._lengths.setdefault(key, dict(range_lengths))
        self._key = key
        return changed

    # -- files ------------------------------------------------------------------------------

    @property
    def host_library(self) -> Path:
        """The handlers as a host shared object (compiled on first use). With
        MLIR bodies it is built for the current plan (df_emit_host_handlers
        exports the plan's handler symbols), one per range lengths."""
        if self.handler_module is not None:
            return self._host_library_with_bodies()
        if self._host_library is None:
            if not self.sources:
                raise DataflowCompileError("the host backend needs the handlers as C sources "
                                           "or a host shared object (.so)", "unsupported")
            self._host_library = host_library(list(self.sources), self.work_dir)
        return self._host_library

    def _host_library_with_bodies(self) -> Path:
        path = self._host_libraries.get(self._key)
        if path is not None:
            return path
        what = "the MLIR handler bodies" if self.handler_module.operators else \
            "handlers generated from the program (built-in handlers, implementations)"
        short = "MLIR bodies" if self.handler_module.operators else "generated handlers"
        if self._host_library is not None:
            raise DataflowCompileError(
                f"the host backend cannot combine {what} with the host shared "
                f"object '{self._host_library}'; give the other handlers as C sources",
                "unsupported")
        if self._given_bitcode:
            raise DataflowCompileError(
                f"the host backend cannot use the nvptx64 bitcode "
                f"{', '.join(str(b) for b in self._given_bitcode)} next to {short}; give "
                f"those handlers as C sources", "unsupported")
        if self._host_bitcode is None:
            self._host_bitcode = [host_bitcode(src, self.work_dir) for src in self.sources]
        path = self.work_dir / f"handlers_host_{len(self._host_libraries)}.so"
        self.handler_module.emit_host(self.packed, path, self._host_bitcode, host_cc()[0])
        self._host_libraries[self._key] = path
        return path

    def write(self, folder) -> dict:
        """Write ``kernel.ptx`` (when compiled) and ``plan.dfplan`` (the
        current plan's blob) for df-run; returns their paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = {"plan": folder / "plan.dfplan"}
        out["plan"].write_bytes(self.blob)
        if self.ptx is not None:
            out["ptx"] = folder / "kernel.ptx"
            out["ptx"].write_text(self.ptx)
        return out

    # -- launching --------------------------------------------------------------------------

    def launch(self, *tensors, range_lengths: Mapping | None = None, backend: str = "auto",
               device: int = 0, threads: int = 1, synchronize: bool = True,
               op_log: bool = False, cost: bool = False, **named) -> LaunchResult:
        """Run the kernel once over ``tensors`` (positional in the program's
        tensor-argument order, or by name). ``range_lengths`` different from
        the current ones re-plan first. ``backend``: "cuda", "host" or
        "auto" (CUDA unless libdfrt finds no CUDA driver or GPU, or the
        artifact has no PTX). Host options: ``threads`` per virtual CTA,
        ``op_log`` and ``cost`` texts in the result."""
        from . import launcher

        refs = bind_tensors(self.program.tensor_args, tensors, named)
        replanned = self.replan(range_lengths) if range_lengths is not None else False
        return launcher.launch(self, refs, backend=backend, device=device, threads=threads,
                               synchronize=synchronize, op_log=op_log, cost=cost,
                               replanned=replanned)

    def kernel_for_current_plan(self) -> str:
        """PTX compiled for the current plan's handler table: a re-plan
        can need a handler variant the compiled plan lacks (a reduce of a
        single partial, say), which the compiled kernel cannot dispatch."""
        if self.target == "host":
            raise DataflowCompileError("the artifact was compiled for the host only",
                                       "unsupported")
        if not self._device_bitcode_built:
            built = [device_bitcode(src, self.target, self.work_dir) for src in self.sources]
            self.bitcode = tuple(built) + self.bitcode
            self._device_bitcode_built = True
        if not self.bitcode and self.handler_module is None:
            raise DataflowCompileError(
                f"range lengths {self.range_lengths} need handler variants the given PTX "
                f"lacks, and there are no handler sources or bitcode to compile them from",
                "unsupported")
        return self._emit(self.packed)

    def _schedule_options(self):
        """Options of libdfrt's re-plan of the blob: its program records the
        selection (arch, replacements), so they are not given twice."""
        kwargs = dict(self.schedule_options)
        if self._blob_program is not None:
            kwargs.pop("arch", None)
            kwargs.pop("replacements", None)
        return schedule_options(range_lengths=self._lengths[self._key], **kwargs)

    def close(self) -> None:
        """Release the GPU sessions (module, plans, executables)."""
        for sessions in self._sessions.values():
            for session in sessions:
                session.close()
        self._sessions.clear()

    def __repr__(self):
        return (f"<CompiledArtifact {self.program.name} target={self.target} "
                f"range_lengths={self.range_lengths}>")
