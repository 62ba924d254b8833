"""TMA descriptor specs and the fail-closed validation of the tensors
behind them (REFERENCE 7.3), done by libdfrt's df_rt_tma_validate. The
ctypes mirrors below follow include/df/runtime.h; libdfrt is optional and
``runtime_available()`` says whether it was found."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int64, c_uint32, c_uint64
from dataclasses import dataclass
from typing import Iterable, Mapping

from . import _ctypes as C
from ._lib import check, runtime
from .tensor_args import DataflowRuntimeTensorMetadata

__all__ = ["DataflowTMADescriptorSpec", "validate_tma_descriptor_runtime_tensors",
           "runtime_available"]

TMA_MAX_RANK = 5  # DF_CU_TENSOR_MAP_MAX_RANK
RT_MAX_DIMS = 8   # DF_RT_MAX_DIMS
DEVICE_TYPES = {None: 0, "cpu": 1, "cuda": 2}


class df_rt_tma_spec(Structure):
    _fields_ = [("name", c_char * C.NAME_MAX), ("tensor_name", c_char * C.NAME_MAX),
                ("dtype", c_uint32), ("rank", c_uint32),
                ("global_dim", c_uint64 * TMA_MAX_RANK), ("global_stride", c_uint64 * TMA_MAX_RANK),
                ("box_dim", c_uint32 * TMA_MAX_RANK), ("element_strides", c_uint32 * TMA_MAX_RANK),
                ("interleave", c_uint32), ("swizzle", c_uint32), ("l2_promotion", c_uint32),
                ("oob_fill", c_uint32), ("is_im2col", c_bool)]


class df_rt_tensor(Structure):
    _fields_ = [("data_ptr", c_uint64), ("source", c_char_p), ("missing", c_bool),
                ("has_shape", c_bool), ("has_strides", c_bool), ("ndim", c_uint32),
                ("shape", c_int64 * RT_MAX_DIMS), ("strides_bytes", c_int64 * RT_MAX_DIMS),
                ("device_type", C.enum), ("has_device_index", c_bool), ("device_index", c_int),
                ("dtype_code", c_uint32), ("dtype_bits", c_uint32)]


class df_rt_tma_binding(Structure):
    _fields_ = [("name", c_char_p), ("has_ptr", c_bool), ("data_ptr", c_uint64),
                ("meta", POINTER(df_rt_tensor))]


def runtime_available() -> bool:
    return runtime.available()


def _declare():
    dll = runtime.load()
    fn = dll.df_rt_tma_validate
    fn.restype = C.df_status
    fn.argtypes = [POINTER(df_rt_tma_spec), c_uint32, POINTER(df_rt_tma_binding), c_uint32, c_int]
    return fn


@dataclass(frozen=True)
class DataflowTMADescriptorSpec:
    """One tensor-map descriptor the kernel takes by value; dims and strides
    innermost first, enums as the driver numbers them."""

    name: str
    tensor_name: str
    dtype: int
    tensor_rank: int
    global_dim: tuple
    global_stride: tuple
    box_dim: tuple
    element_strides: tuple
    interleave: int = 0
    swizzle: int = 0
    l2_promotion: int = 0
    oob_fill: int = 0
    is_im2col: bool = False

    def to_c(self) -> df_rt_tma_spec:
        s = df_rt_tma_spec()
        s.name = self.name.encode()
        s.tensor_name = self.tensor_name.encode()
        s.dtype, s.rank = self.dtype, self.tensor_rank
        for field in ("global_dim", "global_stride", "box_dim", "element_strides"):
            values = tuple(getattr(self, field))
            if len(values) > TMA_MAX_RANK:
                raise ValueError(f"TMA descriptor '{self.name}': {field} has {len(values)} "
                                 f"entries, at most {TMA_MAX_RANK}")
            target = getattr(s, field)
            for i, v in enumerate(values):
                target[i] = v
        s.interleave, s.swizzle = self.interleave, self.swizzle
        s.l2_promotion, s.oob_fill = self.l2_promotion, self.oob_fill
        s.is_im2col = bool(self.is_im2col)
        return s


def _tensor(meta: DataflowRuntimeTensorMetadata, ptr: int, keep: list) -> df_rt_tensor:
    t = df_rt_tensor()
    t.data_ptr = ptr
    source = (meta.source or "").encode()
    keep.append(source)
    t.source = source
    t.missing = meta.source == "missing"
    if meta.shape is not None:
        t.has_shape = True
        t.ndim = len(meta.shape)
        for i, v in enumerate(meta.shape[:RT_MAX_DIMS]):
            t.shape[i] = v
    if meta.strides_bytes is not None:
        t.has_strides = True
        t.ndim = max(t.ndim, len(meta.strides_bytes))
        for i, v in enumerate(meta.strides_bytes[:RT_MAX_DIMS]):
            t.strides_bytes[i] = v
    t.device_type = DEVICE_TYPES.get(meta.device_type, 0)
    if meta.device_index is not None:
        t.has_device_index = True
        t.device_index = meta.device_index
    t.dtype_code, t.dtype_bits = meta.dtype_code, meta.dtype_bits
    return t


def validate_tma_descriptor_runtime_tensors(
        specs: Iterable[DataflowTMADescriptorSpec], *, tensor_data_ptrs: Mapping[str, int],
        tensor_metadata: Mapping[str, DataflowRuntimeTensorMetadata] | None = None,
        expected_device_ordinal: int | None = None) -> None:
    """Raise ValueError unless every spec's tensor is present, non-null,
    16-byte aligned, described, of the right dtype, rank, shape, strides and
    CUDA device (df_rt_tma_validate; needs libdfrt)."""
    fn = _declare()
    specs = list(specs)
    carr = (df_rt_tma_spec * max(1, len(specs)))(*[s.to_c() for s in specs])
    metadata = dict(tensor_metadata or {})
    names = sorted(set(tensor_data_ptrs) | set(metadata))
    keep: list = []
    bindings = (df_rt_tma_binding * max(1, len(names)))()
    for i, name in enumerate(names):
        encoded = name.encode()
        keep.append(encoded)
        b = bindings[i]
        b.name = encoded
        b.has_ptr = name in tensor_data_ptrs
        b.data_ptr = int(tensor_data_ptrs.get(name, 0))
        if name in metadata:
            t = _tensor(metadata[name], b.data_ptr, keep)
            keep.append(t)
            b.meta = ctypes.pointer(t)
    ordinal = -1 if expected_device_ordinal is None else int(expected_device_ordinal)
    check(fn(carr, len(specs), bindings, len(names), ordinal))
