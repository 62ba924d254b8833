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
``library=`` (a built-in library handler: "lse_combine", "copy"); the compile
step consumes it. ``workspace_bytes=N`` declares the per-CTA shared-memory
workspace the handler uses (df_ctx_workspace, docs/workspace.md). ``@T.implementation(of=op, tiles=4, ...)`` declares an
implementation of an operator that serves a capability region of its calls
(docs/implementations.md); df.compile selects one per instruction.
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

from ._lib import DataflowValueError, check, lib

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
    "Implementation",
    "implementation",
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
                 name: str | None = None, workspace_bytes: int | None = None):
        self.function = fn
        if workspace_bytes is not None and (isinstance(workspace_bytes, builtins.bool) or
                                            not isinstance(workspace_bytes, int)):
            raise TypeError(f"{kind} handler '{name or fn.__name__}': workspace_bytes must be "
                            f"an int, got {workspace_bytes!r}")
        if workspace_bytes is not None and not -2**63 <= workspace_bytes < 2**63:
            raise DataflowValueError(f"{kind} handler '{name or fn.__name__}': workspace_bytes "
                                     f"{workspace_bytes} is out of range")
        # checked against the limit by df_program_set_handler_workspace
        self.workspace_bytes = workspace_bytes
        self.kind = kind
        self.name = name or fn.__name__
        self.range = tuple(range) if range is not None else None
        self.body = body
        self.implementations: tuple = ()  # Implementation, in declaration order
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

    @property
    def library(self) -> str | None:
        """The built-in library handler the operator uses (``library=``)."""
        return self.body.value if self.body is not None and self.body.kind == "library" \
            else None

    def __repr__(self):
        return f"<dataflow {self.kind} handler {self.name}>"


@dataclass(frozen=True)
class OperatorCall:
    operator: Operator
    bindings: tuple = ()  # ((parameter, tensor name), ...)


def _operator_decorator(kind: str):
    def decorator(fn=None, *, range=None, mlir=None, source=None, library=None, name=None,
                  workspace_bytes=None):
        body = _body(mlir, source, library)

        def wrap(f):
            if not callable(f):
                raise TypeError(f"@dataflow.{kind} decorates a function, got {f!r}")
            return Operator(f, kind, range=range, body=body, name=name,
                            workspace_bytes=workspace_bytes)

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


# ---- implementations by capability region -----------------------------------------------

_ITER_CODES = {None: 0, "tiles": 1, "length": 2}


def _positive(value, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, builtins.bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if value <= 0 or value >= 2**32:
        raise DataflowValueError(f"{what} must be a positive integer, got {value}")
    return value


class Implementation:
    """One implementation of an operator and the region of calls it serves
    (df_impl of include/df/impl.h): exactly ``tiles`` range blocks or
    ``length`` range units (one of them), a reduce ``arity`` class
    ("passthrough", "binary", "generic", or a reduce input count whose
    class is meant), an intermediate ``dtype``, a minimum architecture
    ``min_arch`` ("sm_80" < "sm_90" < "sm_90a"), or ``general`` (serves
    every call where no specialised implementation applies). ``name`` is
    the symbol: a ``void name(const df_ctx *)`` function defined in
    ``source`` (a C source, or LLVM bitcode .bc/.ll), in ``mlir`` (MLIR
    text of ``func.func @name(%ctx: !llvm.ptr)``, whose df.ctx_input/output
    fields are the operator's) or in the handler files given to df.compile. ``of`` is the Operator (or, for a
    replacement, the operator's name)."""

    def __init__(self, name: str, of, *, tiles=None, length=None, arity=None, dtype=None,
                 min_arch=None, general: builtins.bool = False, source=None, mlir=None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"an implementation's name must be a non-empty string, got "
                            f"{name!r}")
        if not isinstance(of, (Operator, str)):
            raise TypeError(f"implementation '{name}': of= takes the Operator it implements, "
                            f"got {of!r}")
        self.name = name
        self.operator = of
        what = f"implementation '{name}'"
        self.tiles = _positive(tiles, f"{what}: tiles")
        self.length = _positive(length, f"{what}: length")
        if self.tiles is not None and self.length is not None:
            raise DataflowValueError(f"{what}: give one of tiles= and length=")
        if arity is not None and not isinstance(arity, str):
            if isinstance(arity, builtins.bool) or not isinstance(arity, int):
                raise TypeError(f"{what}: arity must be 'passthrough', 'binary', 'generic' or "
                                f"an int, got {arity!r}")
            code = ctypes.c_int()
            check(lib.df_arity_class_for(True, arity, ctypes.byref(code)), what)
            arity = lib.df_arity_class_name(code.value).decode()
        self.arity = arity
        self.dtype = _dtype(dtype) if dtype is not None else None
        if min_arch is not None:
            if not isinstance(min_arch, str):
                raise TypeError(f"{what}: min_arch must be a string such as 'sm_90', got "
                                f"{min_arch!r}")
            code = ctypes.c_int()
            check(lib.df_arch_parse(min_arch.encode(), ctypes.byref(code)), what)
            min_arch = lib.df_arch_name(code.value).decode()
        self.min_arch = min_arch
        self.general = builtins.bool(general)
        if source is not None and not isinstance(source, str):
            source = str(source)  # a path-like
        self.source = source
        if mlir is not None and not isinstance(mlir, str):
            raise TypeError(f"{what}: mlir= takes MLIR text (a str), got {type(mlir).__name__}")
        if mlir is not None and source is not None:
            raise TypeError(f"{what}: give its body by one of source= and mlir=")
        self.mlir = mlir
        self.to_c()  # df_impl_check: a general one must not narrow the range or arity

    @property
    def operator_name(self) -> str:
        return self.operator if isinstance(self.operator, str) else self.operator.name

    def to_c(self, origin: int = 0):
        """The df_impl (origin 0 = program, 2 = replacement), checked by
        df_impl_check."""
        from . import _ctypes as C

        im = C.df_impl()
        for field, value in (("name", self.name), ("op", self.operator_name)):
            data = value.encode()
            if len(data) >= C.NAME_MAX:
                raise DataflowValueError(f"implementation '{self.name}': {field} '{value}' is "
                                         f"longer than {C.NAME_MAX - 1} bytes")
            setattr(im, field, data)
        im.origin = origin
        if self.tiles is not None:
            im.iter, im.iter_value = _ITER_CODES["tiles"], self.tiles
        elif self.length is not None:
            im.iter, im.iter_value = _ITER_CODES["length"], self.length
        if self.arity is not None:
            for code in range(3):
                if lib.df_arity_class_name(code).decode() == self.arity:
                    im.has_arity, im.arity = True, code
                    break
            else:
                raise DataflowValueError(f"implementation '{self.name}': arity must be "
                                         f"passthrough, binary or generic, got {self.arity!r}")
        im.dtype = self.dtype.code if self.dtype is not None else 0
        if self.min_arch is not None:
            code = ctypes.c_int()
            check(lib.df_arch_parse(self.min_arch.encode(), ctypes.byref(code)))
            im.min_arch = code.value
        im.general = self.general
        check(lib.df_impl_check(ctypes.byref(im)))
        return im

    @property
    def region(self) -> str:
        """The region as df prints it ("tiles=4,arch=sm_90", "general", "any")."""
        im = self.to_c()
        buf = ctypes.create_string_buffer(256)
        lib.df_impl_region(ctypes.byref(im), buf, len(buf))
        return buf.value.decode()

    @property
    def spec(self) -> str:
        """The replacement spec ``OP=SYMBOL[:region]`` (df_impl_parse's form)."""
        region = self.region
        return f"{self.operator_name}={self.name}" + ("" if region == "any" else f":{region}")

    @classmethod
    def parse(cls, spec: str) -> "Implementation":
        """An implementation from ``OP=SYMBOL[:key[=value],...]`` (keys tiles,
        length, arity, dtype, arch, general), parsed by df_impl_parse."""
        from . import _ctypes as C

        if not isinstance(spec, str):
            raise TypeError(f"a replacement spec is a string, got {type(spec).__name__}")
        im = C.df_impl()
        check(lib.df_impl_parse(spec.encode(), ctypes.byref(im)))
        iter_kind = {1: "tiles", 2: "length"}.get(im.iter)
        return cls(im.name.decode(), im.op.decode(),
                   tiles=im.iter_value if iter_kind == "tiles" else None,
                   length=im.iter_value if iter_kind == "length" else None,
                   arity=lib.df_arity_class_name(im.arity).decode() if im.has_arity else None,
                   dtype=lib.df_dtype_name(im.dtype).decode() if im.dtype else None,
                   min_arch=lib.df_arch_name(im.min_arch).decode() if im.min_arch else None,
                   general=im.general)

    def __repr__(self):
        return f"<dataflow implementation {self.name} of {self.operator_name}: {self.region}>"


def implementation(fn=None, *, of, name: str | None = None, tiles=None, length=None,
                   arity=None, dtype=None, min_arch=None, general: builtins.bool = False,
                   source=None, mlir=None):
    """Declare an implementation of operator ``of`` serving a capability
    region (see Implementation); the decorated function's name is the
    symbol (``name=`` overrides it) and its Python body never runs. The
    implementation is recorded on the operator (``of.implementations``),
    so programs built from the operator afterwards declare it (the MLIR
    form: a ``(!llvm.ptr) -> ()`` func with ``df.implements = @op``)."""
    if not isinstance(of, Operator):
        raise TypeError(f"@implementation: of= takes the Operator it implements (a decorated "
                        f"handler), got {of!r}")

    def wrap(f):
        symbol = name or getattr(f, "__name__", None)
        if not isinstance(symbol, str):
            raise TypeError(f"@implementation decorates a function, got {f!r}")
        im = Implementation(symbol, of, tiles=tiles, length=length, arity=arity, dtype=dtype,
                            min_arch=min_arch, general=general, source=source, mlir=mlir)
        if any(other.name == symbol for other in of.implementations):
            raise DataflowValueError(f"implementation '{symbol}' of '{of.name}' is declared twice")
        of.implementations = of.implementations + (im,)
        return im

    return wrap if fn is None else wrap(fn)


def dataflow_program(task_domain, dynamic_ranges=None, *, name: str = "dataflow_program"):
    """An empty program over ``task_domain`` with ``dynamic_ranges`` (axis ->
    length source); add stages with .partial/.map/.reshared/.reduce/.finalize."""
    return DataflowProgram(task_domain, dynamic_ranges or {}, name=name)


from ._program import DataflowProgram, Stage  # noqa: E402,F401  (after the types it uses)
