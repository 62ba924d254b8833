"""Tensors handed to ``CompiledArtifact.launch``: where their bytes are
(pointer, host or CUDA memory), their element type, shape and strides.

Accepted, in this order: ``None`` (a missing tensor), ``HostTensor``
(a host buffer with an explicit dtype and shape), an ``int`` (a raw
pointer), objects with ``data_ptr()`` (PyTorch tensors: ``shape``,
``stride()``, ``dtype``, ``device``), ``__cuda_array_interface__``,
DLPack (``__dlpack__`` / ``__dlpack_device__``), ``__array_interface__``
(NumPy) and any C-contiguous object with the buffer protocol
(``array.array``, ``bytearray``, ``memoryview``; element type from the
buffer's format). Nothing here imports a third-party package."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import abi_schema as abi
from ._lib import DataflowValueError

__all__ = ["HostTensor", "TensorRef", "resolve_tensor", "bind_tensors"]


def _dtype(name):
    from .language import DType, _dtype as to_dtype

    return name if isinstance(name, DType) else to_dtype(name)


# struct-module format characters of the buffer protocol -> df dtype names
_FORMATS = {"e": "float16", "f": "float32", "d": "float64", "b": "int8", "B": "uint8",
            "h": "int16", "H": "uint16", "i": "int32", "I": "uint32", "q": "int64",
            "Q": "uint64", "?": "bool", "c": "uint8"}
_TYPESTR_KINDS = {"f": "float", "i": "int", "u": "uint", "b": "bool"}


@dataclass
class TensorRef:
    """One resolved tensor argument. ``keep`` holds what must stay alive
    while the kernel may touch the memory (buffer exports, DLPack capsules)."""

    ptr: int
    device: str | None            # "cpu", "cuda" or None (raw pointer, missing)
    device_index: int | None = None
    dtype: Any = None             # language.DType
    shape: tuple | None = None
    strides_bytes: tuple | None = None
    nbytes: int = 0
    source: str = "raw_pointer"
    writable: bool = True
    keep: list = field(default_factory=list)

    @property
    def missing(self) -> bool:
        return self.source == "missing"

    def record(self, ptr: int | None = None) -> bytes:
        """The 32-byte tensor-arg record (REFERENCE 7.1), as libdfrt packs
        it: raw pointers carry only the pointer, descriptions ndim, dtype
        code and bits with the array-interface flag; missing ones are zero."""
        ptr = self.ptr if ptr is None else ptr
        if self.missing:
            return bytes(abi.TENSOR_ARG_STRUCT.size)
        if self.dtype is None:
            return abi.TENSOR_ARG_STRUCT.pack(ptr, 0, 0, 0,
                                              abi.DATAFLOW_TENSOR_ARG_FLAG_RAW_POINTER, 0)
        return abi.TENSOR_ARG_STRUCT.pack(ptr, len(self.shape or ()),
                                          self.dtype.tensor_dtype_code, self.dtype.bits,
                                          abi.DATAFLOW_TENSOR_ARG_FLAG_CUDA_ARRAY_INTERFACE, 0)


class HostTensor:
    """A host buffer (anything with the buffer protocol) seen as a tensor
    of ``dtype`` and ``shape`` (default: 1-D over the whole buffer)."""

    def __init__(self, buffer, dtype, shape=None):
        self.buffer = buffer
        self.dtype = _dtype(dtype)
        view = memoryview(buffer)
        self.nbytes = view.nbytes
        if shape is None:
            if self.nbytes % self.dtype.bytes:
                raise DataflowValueError(f"HostTensor: {self.nbytes} bytes are not a whole "
                                         f"number of {self.dtype.name} elements")
            shape = (self.nbytes // self.dtype.bytes,)
        self.shape = tuple(int(d) for d in shape)
        count = 1
        for d in self.shape:
            count *= d
        if count * self.dtype.bytes != self.nbytes:
            raise DataflowValueError(f"HostTensor: shape {self.shape} of {self.dtype.name} is "
                                     f"{count * self.dtype.bytes} bytes, the buffer holds "
                                     f"{self.nbytes}")

    def __repr__(self):
        return f"HostTensor({self.dtype.name}, shape={self.shape})"


def _contiguous_strides(shape: tuple, itemsize: int) -> tuple:
    acc, out = itemsize, []
    for extent in reversed(shape):
        out.append(acc)
        acc *= extent
    return tuple(reversed(out))


def _extent_bytes(shape: tuple, strides: tuple, itemsize: int) -> int:
    """Bytes from the first element to one past the last (non-negative
    strides), the size of a copy covering the tensor."""
    if any(d == 0 for d in shape):
        return 0
    return itemsize + sum((d - 1) * s for d, s in zip(shape, strides))


def _buffer_pointer(obj, view: memoryview, keep: list) -> tuple[int, bool]:
    """Address of a C-contiguous buffer; read-only buffers are copied (the
    kernel must not write inputs it was given read-only)."""
    if view.nbytes == 0:
        return 0, not view.readonly
    flat = view.cast("B")
    if view.readonly:
        copy = (ctypes.c_char * view.nbytes).from_buffer_copy(flat)
        keep.append(copy)
        return ctypes.addressof(copy), False
    arr = (ctypes.c_char * view.nbytes).from_buffer(flat)
    keep += [obj, flat, arr]
    return ctypes.addressof(arr), True


def _from_buffer(obj, dtype, shape, source: str) -> TensorRef:
    view = memoryview(obj)
    if not view.c_contiguous:
        raise DataflowValueError(f"{source} tensors must be C-contiguous")
    keep: list = []
    ptr, writable = _buffer_pointer(obj, view, keep)
    return TensorRef(ptr, "cpu", None, dtype, shape,
                     _contiguous_strides(shape, dtype.bytes), view.nbytes, source, writable, keep)


def _format_dtype(fmt: str, itemsize: int):
    code = fmt.lstrip("@=<>!")
    if code in ("l", "L"):
        code = {4: "i", 8: "q"}[itemsize] if code == "l" else {4: "I", 8: "Q"}[itemsize]
    name = _FORMATS.get(code)
    if name is None:
        raise TypeError(f"unsupported buffer format {fmt!r}; wrap the buffer in "
                        f"HostTensor(buffer, dtype, shape)")
    return _dtype(name)


def _typestr_dtype(typestr: str):
    kind, size = typestr[1:2], int(typestr[2:] or 0)
    if kind == "b" and size == 1:
        return _dtype("bool")
    if kind not in _TYPESTR_KINDS or size not in (1, 2, 4, 8):
        raise TypeError(f"unsupported array interface typestr {typestr!r}")
    return _dtype(f"{_TYPESTR_KINDS[kind]}{size * 8}")


def _from_interface(value, iface: Mapping, device: str, source: str) -> TensorRef:
    dtype = _typestr_dtype(iface["typestr"])
    shape = tuple(int(d) for d in iface["shape"])
    strides = iface.get("strides")
    strides = tuple(int(s) for s in strides) if strides is not None else \
        _contiguous_strides(shape, dtype.bytes)
    data = iface.get("data")
    if data is None:  # __array_interface__ through the buffer protocol
        return _from_buffer(value, dtype, shape, source)
    ptr, readonly = int(data[0]), bool(data[1])
    return TensorRef(ptr, device, 0 if device == "cuda" else None, dtype, shape, strides,
                     _extent_bytes(shape, strides, dtype.bytes), source, not readonly, [value])


def _from_torch(value) -> TensorRef:
    dtype = _dtype(str(value.dtype))
    shape = tuple(int(d) for d in value.shape)
    stride = getattr(value, "stride", None)
    strides = tuple(int(s) * dtype.bytes for s in stride()) if callable(stride) else \
        _contiguous_strides(shape, dtype.bytes)
    device = getattr(value, "device", None)
    kind = getattr(device, "type", "cuda")  # no device: a CUDA pointer, as the reference
    if kind not in ("cpu", "cuda"):
        raise TypeError(f"tensors on device {kind!r} are not supported (cpu or cuda)")
    index = getattr(device, "index", None)
    return TensorRef(int(value.data_ptr()), kind, index, dtype, shape, strides,
                     _extent_bytes(shape, strides, dtype.bytes), "data_ptr", True, [value])


def _from_dlpack(value) -> TensorRef:
    from ._dlpack import read_capsule

    t = read_capsule(value)
    dtype = _dtype(t.dtype)
    strides = tuple(s * dtype.bytes for s in t.strides) if t.strides is not None else \
        _contiguous_strides(t.shape, dtype.bytes)
    return TensorRef(t.ptr, t.device, t.device_id if t.device == "cuda" else None, dtype,
                     t.shape, strides, _extent_bytes(t.shape, strides, dtype.bytes), "dlpack",
                     True, [value, t.capsule])


def resolve_tensor(value) -> TensorRef:
    """A TensorRef for one launch argument (see the module docstring)."""
    if value is None:
        return TensorRef(0, None, source="missing")
    if isinstance(value, TensorRef):
        return value
    if isinstance(value, HostTensor):
        return _from_buffer(value.buffer, value.dtype, value.shape, "host_tensor")
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 2**64:
            raise ValueError(f"raw tensor pointer must fit 64 bits, got {value}")
        return TensorRef(value, None)
    if callable(getattr(value, "data_ptr", None)):
        return _from_torch(value)
    cai = getattr(value, "__cuda_array_interface__", None)
    if isinstance(cai, Mapping):
        return _from_interface(value, cai, "cuda", "cuda_array_interface")
    if callable(getattr(value, "__dlpack__", None)):
        return _from_dlpack(value)
    ai = getattr(value, "__array_interface__", None)
    if isinstance(ai, Mapping):
        return _from_interface(value, ai, "cpu", "array_interface")
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"cannot use a {type(value).__name__} as a tensor: expected a PyTorch "
                        f"tensor, an object with __cuda_array_interface__, __dlpack__ or "
                        f"__array_interface__, a buffer, HostTensor or an int pointer") from None
    dtype = _format_dtype(view.format, view.itemsize)
    shape = tuple(view.shape) if view.ndim else (1,)
    return _from_buffer(value, dtype, shape, "buffer")


def bind_tensors(names: tuple, args: tuple, named: Mapping[str, Any]) -> list:
    """TensorRefs in the program's tensor-argument order from positional
    and keyword arguments; every tensor must be given (None = missing)."""
    if len(args) > len(names):
        raise TypeError(f"the program takes {len(names)} tensors ({', '.join(names)}), got "
                        f"{len(args)} positional")
    values = dict(zip(names, args))
    for name, value in named.items():
        if name not in names:
            raise TypeError(f"'{name}' is not a tensor argument of the program "
                            f"({', '.join(names)})")
        if name in values:
            raise TypeError(f"tensor '{name}' given both by position and by name")
        values[name] = value
    absent = [name for name in names if name not in values]
    if absent:
        raise TypeError(f"missing tensor argument(s) {', '.join(absent)} (pass None for a "
                        f"tensor the handlers do not use)")
    return [resolve_tensor(values[name]) for name in names]
