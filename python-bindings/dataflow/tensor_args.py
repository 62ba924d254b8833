"""Tensor arguments (REFERENCE 7.1, 7.2): 32-byte records the kernel reads,
from raw pointers, PyTorch-style tensors (``data_ptr()``) or objects with a
CUDA array interface, plus the runtime metadata TMA validation needs.
Element types are resolved by df (df_dtype_parse / df_dtype_code /
df_dtype_bits); nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import abi_schema as abi
from .abi_schema import TENSOR_ARG_STRUCT

__all__ = ["TENSOR_ARG_STRUCT", "DataflowRuntimeTensorMetadata", "DataflowTensorArg",
           "pack_tensor_arg", "pack_tensor_args", "program_tensor_args"]


@dataclass(frozen=True)
class DataflowRuntimeTensorMetadata:
    source: str
    shape: tuple | None = None
    strides_bytes: tuple | None = None
    device_type: str | None = None
    device_index: int | None = None
    dtype_code: int = abi.DATAFLOW_TENSOR_DTYPE_UNKNOWN
    dtype_bits: int = 0
    layout_fingerprint: str | None = None


@dataclass(frozen=True)
class DataflowTensorArg:
    record: bytes
    data_ptr: int
    metadata: DataflowRuntimeTensorMetadata


_TYPESTR_KINDS = {"f": "float", "i": "int", "u": "uint", "b": "bool"}


def _dtype_of(name: str):
    from .language import DType

    return DType(name)


def _typestr_dtype(typestr: str):
    kind, size = typestr[1:2], int(typestr[2:] or 0)
    if kind == "b" and size == 1:
        return _dtype_of("bool")
    if kind not in _TYPESTR_KINDS or size not in (1, 2, 4, 8):
        raise TypeError(f"unsupported CUDA array interface typestr {typestr!r}")
    return _dtype_of(f"{_TYPESTR_KINDS[kind]}{size * 8}")


def _u64(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise ValueError(f"{what} must be an unsigned 64-bit integer, got {value!r}")
    return value


def pack_tensor_arg(value: Any) -> DataflowTensorArg:
    """One tensor argument: an int (raw device pointer), a tensor with
    ``data_ptr()`` (shape, dtype, strides, device), or an object with
    ``__cuda_array_interface__``."""
    if isinstance(value, int) and not isinstance(value, bool):
        ptr = _u64(value, "raw tensor pointer")
        meta = DataflowRuntimeTensorMetadata(source="raw_pointer")
        flags = abi.DATAFLOW_TENSOR_ARG_FLAG_RAW_POINTER
        return DataflowTensorArg(TENSOR_ARG_STRUCT.pack(ptr, 0, 0, 0, flags, 0), ptr, meta)
    if callable(getattr(value, "data_ptr", None)):
        ptr = _u64(int(value.data_ptr()), "tensor data_ptr()")
        dtype = _dtype_of(str(value.dtype))
        shape = tuple(int(d) for d in value.shape)
        stride = getattr(value, "stride", None)
        strides = tuple(int(s) * dtype.bytes for s in stride()) if callable(stride) else None
        device = getattr(value, "device", None)
        meta = DataflowRuntimeTensorMetadata(
            source="data_ptr", shape=shape, strides_bytes=strides,
            device_type=getattr(device, "type", None), device_index=getattr(device, "index", None),
            dtype_code=dtype.tensor_dtype_code, dtype_bits=dtype.bits)
        record = TENSOR_ARG_STRUCT.pack(ptr, len(shape), meta.dtype_code, meta.dtype_bits,
                                        abi.DATAFLOW_TENSOR_ARG_FLAG_DATA_PTR, 0)
        return DataflowTensorArg(record, ptr, meta)
    cai = getattr(value, "__cuda_array_interface__", None)
    if isinstance(cai, Mapping):
        ptr = _u64(int(cai["data"][0]), "CUDA array interface data pointer")
        dtype = _typestr_dtype(cai["typestr"])
        shape = tuple(int(d) for d in cai["shape"])
        strides = cai.get("strides")
        if strides is None:  # C-contiguous
            acc, out = dtype.bytes, []
            for extent in reversed(shape):
                out.append(acc)
                acc *= extent
            strides = tuple(reversed(out))
        meta = DataflowRuntimeTensorMetadata(
            source="cuda_array_interface", shape=shape, strides_bytes=tuple(strides),
            device_type="cuda", dtype_code=dtype.tensor_dtype_code, dtype_bits=dtype.bits)
        record = TENSOR_ARG_STRUCT.pack(ptr, len(shape), meta.dtype_code, meta.dtype_bits,
                                        abi.DATAFLOW_TENSOR_ARG_FLAG_CUDA_ARRAY_INTERFACE, 0)
        return DataflowTensorArg(record, ptr, meta)
    raise TypeError(f"Dataflow tensor arguments must be an int pointer, an object with "
                    f"data_ptr() or a CUDA array interface, got {type(value).__name__}")


def program_tensor_args(program) -> tuple:
    """External tensor names in argument order (df_program_tensor_args)."""
    return program.tensor_args


def pack_tensor_args(program, tensors: Mapping[str, Any], *,
                     allow_missing: bool = False) -> tuple[bytes, dict]:
    """Records for every external tensor of ``program`` in argument order;
    returns (bytes, {name: DataflowRuntimeTensorMetadata})."""
    records, metadata = [], {}
    for name in program.tensor_args:
        if name not in tensors:
            if not allow_missing:
                raise KeyError(f"missing tensor argument '{name}'")
            records.append(bytes(TENSOR_ARG_STRUCT.size))
            metadata[name] = DataflowRuntimeTensorMetadata(source="missing")
            continue
        arg = pack_tensor_arg(tensors[name])
        records.append(arg.record)
        metadata[name] = arg.metadata
    return b"".join(records), metadata


def tensor_data_ptrs(program, tensors: Mapping[str, Any]) -> dict:
    return {name: pack_tensor_arg(tensors[name]).data_ptr
            for name in program.tensor_args if name in tensors}


