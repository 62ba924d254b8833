"""DataflowProgram: the program builder of ``dataflow.language`` and its
conversion to df's C program model (df_program_* builders), from which df's
C code validates it, dumps it and builds its IR."""

from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass
from typing import Any, Mapping

from . import _ctypes as C
from ._lib import DataflowValueError, capture, check, compiler, error_for, lib

__all__ = ["DataflowProgram", "DataflowProgramError", "Stage", "Owned"]


class DataflowProgramError(DataflowValueError):
    """A program breaks a rule of df-verify; ``stage`` names the stage (or None
    when the rule concerns the whole program)."""

    def __init__(self, message: str, stage: str | None = None):
        super().__init__(message)
        self.stage = stage


class Owned:
    """A C object owned by Python: destroyed with ``destroy`` when collected."""

    def __init__(self, ptr: int, destroy, keep: Any = None):
        self.ptr = ptr
        self.keep = keep  # Python objects the C object points into
        self._finalizer = weakref.finalize(self, destroy, ptr)

    def close(self) -> None:
        self._finalizer()


def _name(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    data = value.encode()
    if len(data) >= C.NAME_MAX:
        raise DataflowValueError(f"{what} '{value}' is longer than {C.NAME_MAX - 1} bytes")
    return data


def _fields(itype) -> ctypes.Array:
    arr = (C.df_field * max(1, len(itype.fields)))()
    for i, f in enumerate(itype.fields):
        arr[i].name = _name(f.name, f"intermediate '{itype.name}' field name")
        arr[i].dtype = f.dtype.code
        if len(f.shape) > C.MAX_RANK:
            raise DataflowValueError(f"intermediate '{itype.name}' field '{f.name}': rank "
                                     f"{len(f.shape)} exceeds {C.MAX_RANK}")
        arr[i].rank = len(f.shape)
        for d, extent in enumerate(f.shape):
            if extent <= 0 or extent >= 2**32:
                raise DataflowValueError(f"intermediate '{itype.name}' field '{f.name}': every "
                                         f"dimension must be positive, got {extent}")
            arr[i].shape[d] = extent
    return arr


def itype_slot_bytes(itype) -> int:
    """df_itype_slot_bytes of a language IntermediateType."""
    fields = _fields(itype)
    t = C.df_itype(_name(itype.name, "intermediate name"), len(itype.fields),
                   ctypes.cast(fields, ctypes.POINTER(C.df_field)))
    return lib.df_itype_slot_bytes(ctypes.byref(t))


_STAGE_KINDS = {"map": 0, "reduce": 1, "reshared": 2, "finalize": 3}
_OP_KINDS = {"iter": 0, "map": 1, "reduce": 2, "finalize": 3}
_PARAM_KINDS = {"scalar": 0, "tensor": 1, "inter": 2, "list": 3}


@dataclass(frozen=True)
class Stage:
    """One stage as the builder recorded it."""

    kind: str  # map | reduce | reshared | finalize (the partial is a map)
    name: str
    call: Any = None  # language.OperatorCall; None for reshared
    input: str | None = None
    task_args: tuple = ()
    range_axis: str | None = None
    output_type: Any = None  # reshared: logical type
    physical_output_type: Any = None  # reshared: physical type
    output_arity: int = 1
    policy: str = "hbm_all_gather"


class DataflowProgram:
    """A program under construction. Builder methods return a new program;
    rules are checked by df's C validation (df_program_validate), which runs
    whenever the program is used (validate, schedule, to_mlir, dump)."""

    def __init__(self, task_domain, dynamic_ranges: Mapping[str, str] | None = None, *,
                 name: str = "dataflow_program", stages: tuple = ()):
        if isinstance(task_domain, str):
            task_domain = (task_domain,)
        self.task_domain = tuple(task_domain)
        self.dynamic_ranges = dict(dynamic_ranges or {})
        self.name = name
        self.stages = tuple(stages)
        self._c = None

    # -- builders -----------------------------------------------------------------------

    def _with(self, stage: Stage) -> "DataflowProgram":
        return DataflowProgram(self.task_domain, self.dynamic_ranges, name=self.name,
                               stages=self.stages + (stage,))

    def _previous(self) -> str | None:
        return self.stages[-1].name if self.stages else None

    @staticmethod
    def _call(call, method: str):
        from .language import Operator, OperatorCall

        if isinstance(call, Operator):
            call = call()
        if not isinstance(call, OperatorCall):
            raise TypeError(f"DataflowProgram.{method} expects a handler call such as "
                            f"split_kv(Q=\"Q\"), got {call!r}")
        return call

    @staticmethod
    def _task_args(task_args) -> tuple:
        if task_args is None:
            return ()
        if isinstance(task_args, str):
            task_args = (task_args,)
        return tuple(task_args)

    def partial(self, call, *, task_args=None, range_axis=None,
                name: str = "partial") -> "DataflowProgram":
        """The iter stage of the canonical pipeline over ``range_axis``."""
        return self._with(Stage("map", name, self._call(call, "partial"), None,
                                self._task_args(task_args), range_axis))

    def map(self, call, *, name: str | None = None, input: str | None = None, task_args=None,
            range_axis=None) -> "DataflowProgram":
        """A map stage (stage graphs), optionally consuming stage ``input``."""
        call = self._call(call, "map")
        return self._with(Stage("map", name or call.operator.name, call, input,
                                self._task_args(task_args), range_axis))

    def reshared(self, *, input: str | None = None, name: str = "reshared", output_type=None,
                 physical_output_type=None, output_arity: int = 1,
                 policy: str = "hbm_all_gather") -> "DataflowProgram":
        """Re-shard stage ``input`` across the ranks of a cluster."""
        if isinstance(output_arity, bool) or not isinstance(output_arity, int):
            raise TypeError(f"reshared stage '{name}': output_arity must be an int, got "
                            f"{output_arity!r}")
        return self._with(Stage("reshared", name, None, input if input is not None
                                else self._previous(), output_type=output_type,
                                physical_output_type=physical_output_type,
                                output_arity=output_arity, policy=policy))

    def reduce(self, call, *, name: str = "reduce",
               input: str | None = None) -> "DataflowProgram":
        """Combine the partials of each task."""
        return self._with(Stage("reduce", name, self._call(call, "reduce"),
                                input if input is not None else self._previous()))

    def finalize(self, call, *, name: str = "finalize",
                 input: str | None = None) -> "DataflowProgram":
        """Consume the last stream and write the outputs."""
        return self._with(Stage("finalize", name, self._call(call, "finalize"),
                                input if input is not None else self._previous()))

    def named(self, name: str) -> "DataflowProgram":
        """The same program under another name (the IR function name)."""
        return DataflowProgram(self.task_domain, self.dynamic_ranges, name=name,
                               stages=self.stages)

    # -- the model ----------------------------------------------------------------------

    def intermediate_types(self) -> tuple:
        """Intermediate classes in df's order: first appearance walking the
        stages (handler parameters, then result; reshared logical, physical)."""
        from .language import intermediate_of

        seen: list = []

        def add(t):
            if t is not None and intermediate_of(t) is not None and \
                    not any(t is s for s in seen):
                seen.append(t)

        for st in self.stages:
            if st.call is not None:
                for p in st.call.operator.parameters:
                    add(p.intermediate)
                add(st.call.operator.result)
            add(st.output_type)
            add(st.physical_output_type)
        return tuple(seen)

    def operators(self) -> tuple:
        """Handlers in order of first use."""
        ops: list = []
        for st in self.stages:
            if st.call is not None and not any(st.call.operator is o for o in ops):
                ops.append(st.call.operator)
        return tuple(ops)

    def stage(self, name: str) -> Stage:
        for st in self.stages:
            if st.name == name:
                return st
        raise KeyError(name)

    def c_program(self) -> Owned:
        """The validated C df_program (built once per program object)."""
        if self._c is None:
            self._c = self._build_c(validate=True)
        return self._c

    def selection_c_program(self, arch=None, replacements=None) -> Owned:
        """A copy of the C program that records a selection's architecture
        and caller replacements (as df-select-variants records them on
        df.plan), so a plan blob written with it lets run-time re-plans
        (libdfrt, ``df-run --replan``) select the same way."""
        from .schedule import select_options

        handle = self._build_c(validate=True)
        keep: list = []
        sel = select_options(arch, replacements, keep)
        prog = ctypes.cast(handle.ptr, ctypes.POINTER(C.df_program)).contents
        prog.select_arch = sel.arch
        for i in range(sel.replacement_count):
            rep = sel.replacements[i]
            impls = ctypes.cast(prog.impls, ctypes.POINTER(C.df_impl))
            same = next((j for j in range(prog.impl_count) if impls[j].name == rep.name and
                         impls[j].op == rep.op), None)
            if same is None:
                check(lib.df_program_add_impl(handle.ptr, ctypes.byref(rep)), "replacement")
                impls = ctypes.cast(prog.impls, ctypes.POINTER(C.df_impl))
                same = prog.impl_count - 1
            else:
                # the program's implementation of that symbol: replacements are
                # the operator's only candidates, so it stands as the replacement
                ctypes.memmove(ctypes.byref(impls[same]), ctypes.byref(rep),
                               ctypes.sizeof(C.df_impl))
            impls[same].origin = 2  # DF_IMPL_REPLACEMENT
        return handle

    def _build_c(self, validate: bool) -> Owned:
        out = ctypes.c_void_p()
        check(lib.df_program_create(None, _name(self.name, "program name"), ctypes.byref(out)))
        handle = Owned(out.value, lib.df_program_destroy)
        self._fill(handle.ptr)
        if validate:
            bad = ctypes.c_int32(-1)
            status = lib.df_program_validate_at(handle.ptr, ctypes.byref(bad))
            if status.code != 0:
                stage = self.stages[bad.value].name if 0 <= bad.value < len(self.stages) else None
                err = error_for(status)
                raise DataflowProgramError(str(err), stage) from None
        return handle

    def _fill(self, p: int) -> None:
        from .language import intermediate_of

        for axis in self.task_domain:
            check(lib.df_program_add_axis(p, _name(axis, "task axis")))
        for axis, source in self.dynamic_ranges.items():
            check(lib.df_program_add_range(p, _name(axis, "dynamic range axis"),
                                           _name(source, f"length source of '{axis}'")))
        types = self.intermediate_types()

        def type_index(t) -> int:
            for i, s in enumerate(types):
                if s is t:
                    return i
            return -1

        for t in types:
            it = intermediate_of(t)
            fields = _fields(it)
            check(lib.df_program_add_type(p, _name(it.name, "intermediate name"),
                                          len(it.fields), fields, None))
        ops = self.operators()
        for op in ops:
            params = (C.df_param * max(1, len(op.parameters)))()
            for i, q in enumerate(op.parameters):
                params[i].name = _name(q.name, f"handler '{op.name}' parameter")
                params[i].kind = _PARAM_KINDS[q.kind]
                params[i].type = type_index(q.intermediate) if q.intermediate is not None else -1
            result = type_index(op.result) if op.result is not None else -1
            check(lib.df_program_add_operator(p, _name(op.name, "handler name"),
                                              _OP_KINDS[op.kind], len(op.parameters), params,
                                              result, None))
            if op.workspace_bytes:
                status = lib.df_program_set_handler_workspace(p, op.name.encode(),
                                                              op.workspace_bytes)
                if status.code != 0:
                    raise DataflowProgramError(str(error_for(status))) from None
            if op.library is not None:
                # df_library_check: the name exists, suits the operator's kind
                # and its intermediate has the fields the handler reads
                status = lib.df_program_set_library(
                    p, op.name.encode(), _name(op.library, f"handler '{op.name}' library"))
                if status.code != 0:
                    raise DataflowProgramError(str(error_for(status))) from None
        for op in ops:
            for im in op.implementations:
                c_impl = im.to_c()
                status = lib.df_program_add_impl(p, ctypes.byref(c_impl))
                if status.code != 0:
                    raise DataflowProgramError(str(error_for(status))) from None
        names = [st.name for st in self.stages]
        for i, st in enumerate(self.stages):
            self._add_stage(p, i, st, names, types, ops, type_index)

    def _add_stage(self, p, i, st: Stage, names, types, ops, type_index) -> None:
        s = C.df_stage()
        s.name = _name(st.name, "stage name")
        s.kind = _STAGE_KINDS[st.kind]
        s.op = next((j for j, o in enumerate(ops) if st.call and st.call.operator is o), -1)
        s.input = -1
        if st.input is not None:
            if st.input not in names[:i]:
                raise DataflowProgramError(
                    f"stage '{st.name}': input '{st.input}' names no earlier stage "
                    f"(stages before it: {', '.join(names[:i]) or 'none'})", st.name)
            s.input = names.index(st.input)
        s.range_axis = _name(st.range_axis or "", "range axis")
        if len(st.task_args) > C.MAX_AXES:
            raise DataflowProgramError(f"stage '{st.name}': more than {C.MAX_AXES} task_args",
                                       st.name)
        s.task_arg_count = len(st.task_args)
        for j, arg in enumerate(st.task_args):
            s.task_args[j].value = _name(arg, f"stage '{st.name}' task argument")
        # sorted by parameter, as an MLIR dictionary (the IR form) holds them
        bindings = sorted(st.call.bindings) if st.call is not None else ()
        barr = (C.df_binding * max(1, len(bindings)))()
        for j, (param, tensor) in enumerate(bindings):
            barr[j].param = _name(param, f"stage '{st.name}' binding parameter")
            barr[j].tensor = _name(tensor, f"stage '{st.name}' tensor name")
        s.binding_count = len(bindings)
        s.bindings = ctypes.cast(barr, ctypes.POINTER(C.df_binding))
        s.type = s.logical_type = -1
        if st.kind == "reshared":
            physical = st.physical_output_type
            if physical is None and s.input >= 0:
                upstream = self.stages[s.input]
                physical = upstream.call.operator.result if upstream.call else \
                    upstream.physical_output_type
            s.type = type_index(physical) if physical is not None else -1
            s.logical_type = type_index(st.output_type) if st.output_type is not None else s.type
            if st.output_arity <= 0 or st.output_arity >= 2**32:
                raise DataflowProgramError(
                    f"reshared stage '{st.name}': output_arity must be positive, got "
                    f"{st.output_arity}", st.name)
            s.output_arity = st.output_arity
            s.policy = _name(st.policy, f"reshared stage '{st.name}' policy")
        elif st.kind != "finalize" and st.call is not None and st.call.operator.result is not None:
            s.type = type_index(st.call.operator.result)
        check(lib.df_program_add_stage(p, ctypes.byref(s), None))

    # -- inspection ---------------------------------------------------------------------

    def validate(self) -> "DataflowProgram":
        """Raise DataflowProgramError with df-verify's message if the program
        breaks a rule; return the program otherwise."""
        self.c_program()
        return self

    def dump(self) -> str:
        """df_program_dump: axes, ranges, intermediates with slot bytes,
        operators, stages with handler identities, tensor argument order."""
        return capture(lib.df_program_dump, self.c_program().ptr)

    def to_mlir(self, validate: bool = True) -> str:
        """The program as df IR (generic form), built by df_program_to_mlir.
        ``validate=False`` converts a program that breaks df-verify's rules
        (to reproduce a diagnostic with df-opt)."""
        handle = self.c_program() if validate else self._build_c(validate=False)
        text = ctypes.c_void_p()
        check(compiler.df_program_to_mlir_text(handle.ptr, ctypes.byref(text)))
        try:
            return ctypes.string_at(text).decode()
        finally:
            lib.df_shared_free(text)

    @property
    def tensor_args(self) -> tuple:
        """External tensor names in argument order (df_program_tensor_args)."""
        p = self.c_program().ptr
        n = lib.df_program_tensor_args(p, None, 0)
        names = (ctypes.c_char_p * max(1, n))()
        lib.df_program_tensor_args(p, names, n)
        return tuple(names[i].decode() for i in range(n))

    def __repr__(self):
        stages = " -> ".join(f"{s.kind}:{s.name}" for s in self.stages)
        return f"<DataflowProgram {self.name} over {self.task_domain}: {stages}>"
