"""The programming surface (import as ``T``): typed intermediates, operator
declarations and the program builder.

    @T.dataflow_intermediate
    class AttnInter:
        lse: T.float32
        o: T.Tensor((2, 8), T.float16)

    @T.dataflow.iter(range=("kv_begin", "kv_end"))
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

Decorated functions are declarations: their Python bodies never run. A
handler's implementation is named with ``mlir=`` (MLIR text of a func.func
with the handler's symbol), ``source=`` (a C source or LLVM bitcode path) or
``library=`` (a built-in library handler); the compile step consumes it.
Programs become df IR through df's C API (see ``DataflowProgram.to_mlir``).
"""

from __future__ import annotations

import builtins
import ctypes
import inspect
import sys
import typing
from dataclasses import dataclass
from types import SimpleNamespace

from ._lib import lib, check

__all__ = [
    "DType",
    "Tensor",
    "Buffer",
    "IntermediateField",
    "IntermediateType",
    "Operator",
    "OperatorCall",
    "HandlerBody",
    "Parameter",
    "dataflow_intermediate",
    "dataflow_program",
    "dataflow",
    "DataflowProgram",
]


# ---- element types -----------------------------------------------------------------------

@dataclass(frozen=True)
class DType:
    """An element type; the name is df's canonical one (df_dtype_parse)."""

    name: str

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"dtype name must be a string, got {type(self.name).__name__}")
        code = ctypes.c_int()
        check(lib.df_dtype_parse(self.name.encode(), ctypes.byref(code)))
        object.__setattr__(self, "name", lib.df_dtype_name(code.value).decode())

    @property
    def code(self) -> int:
        """The df_dtype enumerator."""
        code = ctypes.c_int()
        check(lib.df_dtype_parse(self.name.encode(), ctypes.byref(code)))
        return code.value

    @property
    def bytes(self) -> int:
        return lib.df_dtype_bytes(self.code)

    @property
    def bits(self) -> int:
        return lib.df_dtype_bits(self.code)

    @property
    def tensor_dtype_code(self) -> int:
        """DATAFLOW_TENSOR_DTYPE_* of tensor-arg records."""
        return lib.df_dtype_code(self.code)

    def __repr__(self):
        return f"T.{self.name}"


def _dtype(value) -> DType:
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        return DType(value)
    name = getattr(value, "name", None) or str(value)  # e.g. torch.float16
    return DType(str(name))


_CANONICAL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e4m3fn",
              "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
for _name in _CANONICAL:
    globals()[_name] = DType(_name)
globals()["bool_"] = DType("bool")
half = DType("half")
fp16 = DType("fp16")
bf16 = DType("bf16")
double = DType("double")
globals()["float"] = DType("float")  # T.float, as in the reference surface


@dataclass(frozen=True)
class Tensor:
    """A static tensor type: ``T.Tensor((2, 8), T.float16)``. As a handler
    parameter annotation it marks an external tensor."""

    shape: tuple = ()
    dtype: DType | None = None

    def __post_init__(self):
        shape = self.shape
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(shape)
        for extent in shape:
            if isinstance(extent, builtins.bool) or not isinstance(extent, int):
                raise TypeError(f"T.Tensor shape entries must be ints, got {extent!r}")
        object.__setattr__(self, "shape", shape)
        if self.dtype is not None:
            object.__setattr__(self, "dtype", _dtype(self.dtype))


Buffer = Tensor


# ---- intermediates ------------------------------------------------------------------------

@dataclass(frozen=True)
class IntermediateField:
    name: str
    dtype: DType
    shape: tuple = ()


@dataclass(frozen=True, eq=False)
class IntermediateType:
    """The df description of a ``@dataflow_intermediate`` class."""

    name: str
    fields: tuple
    cls: type | None = None

    @property
    def slot_bytes(self) -> int:
        """Bytes of a slot holding this type (df_itype_slot_bytes)."""
        from . import _program

        return _program.itype_slot_bytes(self)


def _namespace(obj) -> dict:
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    return dict(vars(module)) if module else {}


def _evaluate(annotation, globalns: dict, localns: dict | None, what: str):
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, globalns, localns or {})  # noqa: S307 - annotations only
    except Exception as err:  # an undefined or malformed annotation
        raise TypeError(f"{what}: cannot evaluate annotation {annotation!r}: {err}") from None


def intermediate_of(value) -> IntermediateType | None:
    """The IntermediateType of a decorated class (or the type itself)."""
    if isinstance(value, IntermediateType):
        return value
    return getattr(value, "__dataflow_intermediate__", None) if isinstance(value, type) else None


def dataflow_intermediate(cls):
    """Declare a typed intermediate: annotated fields in order, each a dtype
    (scalar) or ``T.Tensor(shape, dtype)``."""
    if not isinstance(cls, type):
        raise TypeError(f"@dataflow_intermediate decorates a class, got {cls!r}")
    annotations = cls.__dict__.get("__annotations__", {})
    globalns = _namespace(cls)
    fields = []
    for name, annotation in annotations.items():
        value = _evaluate(annotation, globalns, dict(vars(cls)),
                          f"intermediate '{cls.__name__}' field '{name}'")
        if isinstance(value, Tensor):
            if value.dtype is None:
                raise TypeError(f"intermediate '{cls.__name__}' field '{name}': T.Tensor needs a "
                                f"dtype")
            fields.append(IntermediateField(name, value.dtype, value.shape))
        else:
            try:
                fields.append(IntermediateField(name, _dtype(value)))
            except (TypeError, ValueError) as err:
                raise TypeError(f"intermediate '{cls.__name__}' field '{name}': expected a "
                                f"dtype or T.Tensor(shape, dtype), got {value!r} ({err})") from None
    cls.__dataflow_intermediate__ = IntermediateType(cls.__name__, tuple(fields), cls)
    return cls


# ---- operators ----------------------------------------------------------------------------

PARAM_SCALAR, PARAM_TENSOR, PARAM_INTER, PARAM_INTER_LIST = "scalar", "tensor", "inter", "list"


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str  # scalar | tensor | inter | list
    intermediate: type | None = None


@dataclass(frozen=True)
class HandlerBody:
    """Where a handler's implementation comes from: ``mlir`` (text),
    ``source`` (a .c file), ``bitcode`` (a .bc/.ll file) or ``library``."""

    kind: str
    value: str


def _parameter(name: str, annotation, what: str) -> Parameter:
    if annotation is None or annotation is typing.Any or isinstance(annotation, Tensor) or \
            annotation is Tensor:
        return Parameter(name, PARAM_TENSOR)
    if intermediate_of(annotation) is not None:
        return Parameter(name, PARAM_INTER, annotation)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, typing.Sequence) or (
            origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable")):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and intermediate_of(args[0]) is not None:
            return Parameter(name, PARAM_INTER_LIST, args[0])
    if isinstance(annotation, DType):
        return Parameter(name, PARAM_SCALAR)
    raise TypeError(f"{what}: parameter '{name}' has unsupported annotation {annotation!r}; "
                    f"expected a scalar dtype (T.int32), a tensor (no annotation or T.Tensor), "
                    f"an intermediate or list[intermediate]")


def _body(mlir, source, library) -> HandlerBody | None:
    given = [(k, v) for k, v in (("mlir", mlir), ("source", source), ("library", library))
             if v is not None]
    if len(given) > 1:
        raise TypeError("a handler body is given by at most one of mlir=, source=, library=")
    if not given:
        return None
    kind, value = given[0]
    if kind == "mlir" and not isinstance(value, str):
        raise TypeError(f"mlir= takes MLIR text (a str), got {type(value).__name__}")
    if not isinstance(value, str):
        value = str(value)  # a path-like source
    if kind == "source" and value.endswith((".bc", ".ll")):
        kind = "bitcode"
    return HandlerBody(kind, value)


class Operator:
    """A declared handler: name, operator kind, signature and optional body.
    Calling it with tensor bindings (``split_kv(Q="Q")``) makes the call a
    program stage uses; the Python function itself never runs."""

    def __init__(self, fn, kind: str, range=None, body: HandlerBody | None = None,
                 name: str | None = None):
        self.function = fn
        self.kind = kind
        self.name = name or fn.__name__
        self.range = tuple(range) if range is not None else None
        self.body = body
        what = f"{kind} handler '{self.name}'"
        globalns = getattr(fn, "__globals__", {})
        annotations = dict(getattr(fn, "__annotations__", {}))
        params = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{what}: *args and **kwargs are not handler parameters")
            annotation = annotations.get(p.name)
            annotation = _evaluate(annotation, globalns, None, what) if annotation is not None \
                else None
            params.append(_parameter(p.name, annotation, what))
        self.parameters = tuple(params)
        result = annotations.get("return")
        result = _evaluate(result, globalns, None, what) if result is not None else None
        if result is not None and intermediate_of(result) is None:
            raise TypeError(f"{what}: the result must be an intermediate or None, got {result!r}")
        self.result = result
        self.__name__ = self.name
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **bindings) -> "OperatorCall":
        if args:
            raise TypeError(f"{self.kind} handler '{self.name}' takes tensor bindings as keyword "
                            f"arguments (parameter=\"tensor name\"), got {len(args)} positional")
        for param, tensor in bindings.items():
            if not isinstance(tensor, str):
                raise TypeError(f"{self.kind} handler '{self.name}': binding {param}= must name "
                                f"a tensor (a string), got {tensor!r}")
        return OperatorCall(self, tuple(bindings.items()))

    def __repr__(self):
        return f"<dataflow {self.kind} handler {self.name}>"


@dataclass(frozen=True)
class OperatorCall:
    operator: Operator
    bindings: tuple = ()  # ((parameter, tensor name), ...)


def _operator_decorator(kind: str):
    def decorator(fn=None, *, range=None, mlir=None, source=None, library=None, name=None):
        body = _body(mlir, source, library)

        def wrap(f):
            if not callable(f):
                raise TypeError(f"@dataflow.{kind} decorates a function, got {f!r}")
            return Operator(f, kind, range=range, body=body, name=name)

        return wrap if fn is None else wrap(fn)

    decorator.__name__ = kind
    decorator.__doc__ = f"Declare a {kind} handler (the body is never run)."
    return decorator


dataflow = SimpleNamespace(
    iter=_operator_decorator("iter"),
    map=_operator_decorator("map"),
    reduce=_operator_decorator("reduce"),
    finalize=_operator_decorator("finalize"),
)


def dataflow_program(task_domain, dynamic_ranges=None, *, name: str = "dataflow_program"):
    """An empty program over ``task_domain`` with ``dynamic_ranges`` (axis ->
    length source); add stages with .partial/.map/.reshared/.reduce/.finalize."""
    return DataflowProgram(task_domain, dynamic_ranges or {}, name=name)


from ._program import DataflowProgram, Stage  # noqa: E402,F401  (after the types it uses)
