"""A minimal DLPack consumer over ctypes: read the DLTensor behind a
``__dlpack__()`` capsule without taking ownership. The capsule stays named
"dltensor", so the producer's capsule destructor frees the tensor once the
caller drops the capsule (keep it alive while the memory is used)."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p

__all__ = ["DLPackTensor", "read_capsule", "DEVICE_CPU", "DEVICE_CUDA"]

DEVICE_CPU = 1         # kDLCPU
DEVICE_CUDA = 2        # kDLCUDA
DEVICE_CUDA_HOST = 3   # kDLCUDAHost: pinned host memory
DEVICE_CUDA_MANAGED = 13
_HOST_DEVICES = (DEVICE_CPU, DEVICE_CUDA_HOST)
_CUDA_DEVICES = (DEVICE_CUDA, DEVICE_CUDA_MANAGED)

# DLDataTypeCode -> df dtype kind
_KINDS = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 6: "bool"}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackTensor:
    """What a capsule describes: pointer (data + byte_offset), device,
    dtype name, shape and element strides (None = C-contiguous)."""

    def __init__(self, ptr, device, device_id, dtype, shape, strides, capsule):
        self.ptr = ptr
        self.device = device
        self.device_id = device_id
        self.dtype = dtype
        self.shape = shape
        self.strides = strides
        self.capsule = capsule


def _capsule_pointer(capsule) -> int:
    api = ctypes.pythonapi
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetPointer.restype = c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    if not api.PyCapsule_IsValid(capsule, b"dltensor"):
        raise TypeError("__dlpack__() did not return an unconsumed 'dltensor' capsule")
    return api.PyCapsule_GetPointer(capsule, b"dltensor")


def _dtype_name(dt: DLDataType) -> str:
    if dt.lanes != 1:
        raise TypeError(f"DLPack tensors with {dt.lanes} lanes are not supported")
    kind = _KINDS.get(dt.code)
    if kind is None:
        raise TypeError(f"unsupported DLPack dtype code {dt.code}")
    if kind == "bool":
        return "bool"
    return "bfloat16" if kind == "bfloat" else f"{kind}{dt.bits}"


def read_capsule(value) -> DLPackTensor:
    """Call ``value.__dlpack__()`` and read its DLTensor."""
    capsule = value.__dlpack__()
    managed = DLManagedTensor.from_address(_capsule_pointer(capsule))
    t = managed.dl_tensor
    device = int(t.device.device_type)
    if device in _HOST_DEVICES:
        kind = "cpu"
    elif device in _CUDA_DEVICES:
        kind = "cuda"
    else:
        raise TypeError(f"DLPack device type {device} is neither host memory nor CUDA")
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    strides = tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else None
    ptr = (t.data or 0) + int(t.byte_offset)
    return DLPackTensor(ptr, kind, int(t.device.device_id), _dtype_name(t.dtype), shape,
                        strides, capsule)
