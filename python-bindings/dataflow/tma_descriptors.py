"""TMA descriptor specs and the fail-closed validation of the tensors
behind them (REFERENCE 7.3), done by libdfrt's df_rt_tma_validate. The
ctypes mirrors of include/df/runtime.h live in _ctypes_rt; libdfrt is optional and
``runtime_available()`` says whether it was found."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Iterable, Mapping

from ._ctypes_rt import (DEVICE_TYPES, RT_MAX_DIMS, TMA_MAX_RANK,  # noqa: F401
                         df_rt_tensor, df_rt_tma_binding, df_rt_tma_spec)
from ._lib import check, runtime
from .tensor_args import DataflowRuntimeTensorMetadata

__all__ = ["DataflowTMADescriptorSpec", "validate_tma_descriptor_runtime_tensors",
           "runtime_available"]


def runtime_available() -> bool:
    return runtime.available()


def _declare():
    return runtime.load().df_rt_tma_validate


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
