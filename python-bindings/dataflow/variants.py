"""Handler identities and variant keys (REFERENCE 1.5, 1.6).

Every object is validated by df's C code: constructors go through the C JSON
reader (df_identity_from_json / df_variant_from_json) or the C checks
(df_iter_spec_check, df_arity_class_for), and ``to_dict`` is the C JSON
writer's output, so the serialised form is df's canonical one."""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import _ctypes as C
from ._lib import DataflowTypeError, check, lib

ITER_RANGE_GENERIC = "generic"
ITER_RANGE_TILE_COUNT = "tile_count"
ITER_RANGE_EXACT_LENGTH = "exact_length"
REDUCE_ARITY_PASSTHROUGH = "passthrough"
REDUCE_ARITY_BINARY = "binary"
REDUCE_ARITY_GENERIC = "generic"
SCHEMA_VERSION = 1

ITER_RANGE_SPECIALIZATION_KIND = "iter_range"
REDUCE_ARITY_SPECIALIZATION_KIND = "reduce_arity"

__all__ = [
    "DataflowHandlerIdentity",
    "DataflowHandlerVariantKey",
    "IterRangeSpecialization",
    "ReduceAritySpecialization",
    "ITER_RANGE_GENERIC",
    "ITER_RANGE_TILE_COUNT",
    "ITER_RANGE_EXACT_LENGTH",
    "REDUCE_ARITY_PASSTHROUGH",
    "REDUCE_ARITY_BINARY",
    "REDUCE_ARITY_GENERIC",
]


def _dumps(value: Any, what: str) -> bytes:
    try:
        return json.dumps(value).encode()
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what} is not serialisable: {err}") from None


def _require_int(value: Any, what: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataflowTypeError(f"{what} must be an int{' or None' if allow_none else ''}, "
                                f"got {type(value).__name__}")


def _kind_name(kind: int) -> str:
    return lib.df_op_kind_name(kind).decode()


# ---- identities -------------------------------------------------------------------------

@dataclass(frozen=True)
class DataflowHandlerIdentity:
    """(operator_id, operator_kind): the binding key of a handler."""

    operator_id: int
    operator_kind: str

    def __post_init__(self):
        ident = C.df_identity()
        check(lib.df_identity_from_json(_dumps(self._raw_dict(), "Dataflow handler identity"),
                                        ctypes.byref(ident)))

    def _raw_dict(self) -> dict:
        return {"operator_id": self.operator_id, "operator_kind": self.operator_kind}

    @property
    def binding_key(self) -> tuple[int, str]:
        return (self.operator_id, self.operator_kind)

    def to_c(self) -> C.df_identity:
        ident = C.df_identity()
        check(lib.df_identity_from_json(json.dumps(self._raw_dict()).encode(),
                                        ctypes.byref(ident)))
        return ident

    @classmethod
    def from_c(cls, ident: C.df_identity) -> "DataflowHandlerIdentity":
        return cls(int(ident.operator_id), _kind_name(ident.kind))

    def to_dict(self) -> dict:
        ident = self.to_c()
        buf = ctypes.create_string_buffer(256)
        lib.df_identity_to_json(ctypes.byref(ident), buf, len(buf))
        return json.loads(buf.value)

    @classmethod
    def from_dict(cls, data: Mapping) -> "DataflowHandlerIdentity":
        ident = C.df_identity()
        check(lib.df_identity_from_json(_dumps(dict(data), "Dataflow handler identity"),
                                        ctypes.byref(ident)))
        return cls.from_c(ident)


# ---- typed specialisations ----------------------------------------------------------------

@dataclass(frozen=True)
class IterRangeSpecialization:
    """How an ITER handler is specialised for its range: generic, a fixed
    tile count, or an exact length."""

    mode: str = ITER_RANGE_GENERIC
    value: int | None = None

    def __post_init__(self):
        if not isinstance(self.mode, str):
            raise DataflowTypeError(
                f"Dataflow ITER specialization mode must be a string, got "
                f"{type(self.mode).__name__}")
        _require_int(self.value, "Dataflow ITER specialization value", allow_none=True)
        mode = ctypes.c_int()
        check(lib.df_iter_mode_parse(self.mode.encode(), ctypes.byref(mode)))
        value = self.value if self.value is not None else 0
        value = max(min(value, 2**63 - 1), -(2**63))
        check(lib.df_iter_spec_check(mode.value, self.value is not None, value))

    kind = ITER_RANGE_SPECIALIZATION_KIND

    @property
    def canonical_key(self) -> tuple:
        return (ITER_RANGE_SPECIALIZATION_KIND, self.mode, self.value)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "value": {"mode": self.mode, "value": self.value}}


@dataclass(frozen=True)
class ReduceAritySpecialization:
    """The arity class of a REDUCE handler: passthrough (1), binary (2) or
    generic (3 or more, or unknown)."""

    arity_class: str = REDUCE_ARITY_GENERIC

    def __post_init__(self):
        if not isinstance(self.arity_class, str):
            raise DataflowTypeError(
                f"Dataflow reduce arity class must be a string, got "
                f"{type(self.arity_class).__name__}")
        _arity_code(self.arity_class)

    kind = REDUCE_ARITY_SPECIALIZATION_KIND

    @classmethod
    def for_arity(cls, arity: int | None) -> "ReduceAritySpecialization":
        _require_int(arity, "Dataflow reduce arity", allow_none=True)
        out = ctypes.c_int()
        value = 0 if arity is None else max(min(arity, 2**63 - 1), -(2**63))
        check(lib.df_arity_class_for(arity is not None, value, ctypes.byref(out)))
        return cls(lib.df_arity_class_name(out.value).decode())

    @property
    def canonical_key(self) -> tuple:
        return (REDUCE_ARITY_SPECIALIZATION_KIND, self.arity_class)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "value": self.arity_class}


def _arity_code(name: str) -> int:
    for code in range(3):
        if lib.df_arity_class_name(code).decode() == name:
            return code
    raise ValueError(f"Unsupported Dataflow reduce arity class '{name}'; expected one of: "
                     f"binary, generic, passthrough")


# ---- variant keys --------------------------------------------------------------------------

@dataclass(frozen=True)
class DataflowHandlerVariantKey:
    """A handler identity plus its typed specialisations (sorted by canonical
    key) and the schema version."""

    base_identity: DataflowHandlerIdentity
    typed_specializations: tuple = ()
    schema_version: int = SCHEMA_VERSION
    _c: Any = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self):
        if not isinstance(self.base_identity, DataflowHandlerIdentity):
            raise TypeError("DataflowHandlerVariantKey base_identity must be a "
                            f"DataflowHandlerIdentity, got {type(self.base_identity).__name__}")
        specs = tuple(self.typed_specializations)
        for spec in specs:
            if not isinstance(spec, (IterRangeSpecialization, ReduceAritySpecialization)):
                raise TypeError("Dataflow handler specializations must be "
                                "IterRangeSpecialization or ReduceAritySpecialization, got "
                                f"{type(spec).__name__}")
        raw = {"schema_version": self.schema_version,
               "base_identity": self.base_identity._raw_dict(),
               "typed_specializations": [spec.to_dict() for spec in specs]}
        variant = C.df_variant()
        check(lib.df_variant_from_json(_dumps(raw, "Dataflow handler variant key"),
                                       ctypes.byref(variant)))
        object.__setattr__(self, "typed_specializations",
                           tuple(sorted(specs, key=lambda s: _sort_key(s.canonical_key))))
        object.__setattr__(self, "_c", variant)

    @property
    def binding_key(self) -> tuple[int, str]:
        return self.base_identity.binding_key

    @property
    def iter_range(self) -> IterRangeSpecialization | None:
        return next((s for s in self.typed_specializations
                     if isinstance(s, IterRangeSpecialization)), None)

    @property
    def reduce_arity(self) -> ReduceAritySpecialization | None:
        return next((s for s in self.typed_specializations
                     if isinstance(s, ReduceAritySpecialization)), None)

    @property
    def canonical_key(self) -> tuple:
        return (self.schema_version, self.binding_key,
                tuple(s.canonical_key for s in self.typed_specializations))

    def diagnostic_name(self, base: str) -> str:
        buf = ctypes.create_string_buffer(256)
        lib.df_variant_diag_name(ctypes.byref(self._c), base.encode(), buf, len(buf))
        return buf.value.decode()

    def to_c(self) -> C.df_variant:
        return C.df_variant.from_buffer_copy(self._c)

    @classmethod
    def from_c(cls, variant: C.df_variant) -> "DataflowHandlerVariantKey":
        base = DataflowHandlerIdentity.from_c(variant.base)
        specs = []
        if variant.has_iter:
            mode = lib.df_iter_mode_name(variant.iter_mode).decode()
            specs.append(IterRangeSpecialization(
                mode, None if mode == ITER_RANGE_GENERIC else int(variant.iter_value)))
        if variant.has_arity:
            specs.append(ReduceAritySpecialization(
                lib.df_arity_class_name(variant.arity).decode()))
        return cls(base, tuple(specs), int(variant.schema_version))

    def to_dict(self) -> dict:
        buf = ctypes.create_string_buffer(512)
        lib.df_variant_to_json(ctypes.byref(self._c), buf, len(buf))
        return json.loads(buf.value)

    @classmethod
    def from_dict(cls, data: Mapping) -> "DataflowHandlerVariantKey":
        variant = C.df_variant()
        check(lib.df_variant_from_json(_dumps(dict(data), "Dataflow handler variant key"),
                                       ctypes.byref(variant)))
        return cls.from_c(variant)

    @classmethod
    def default_for_identity(cls, identity: DataflowHandlerIdentity,
                             reduce_arity: int | None = None) -> "DataflowHandlerVariantKey":
        """iter -> generic; reduce -> the class of ``reduce_arity`` (None:
        generic); map and finalize -> no specialisation."""
        if reduce_arity is not None:
            ReduceAritySpecialization.for_arity(reduce_arity)  # C check of the arity
        variant = C.df_variant()
        arity = 0 if reduce_arity is None else min(reduce_arity, 2**63 - 1)
        check(lib.df_variant_default(identity.to_c(), arity, ctypes.byref(variant)))
        return cls.from_c(variant)


def _sort_key(key: tuple) -> tuple:
    # None sorts before any value, like an absent entry.
    return tuple((0, 0) if item is None else (1, item) for item in key)


_VARIANT_CACHE: dict[bytes, DataflowHandlerVariantKey] = {}
_IDENTITY_CACHE: dict[bytes, DataflowHandlerIdentity] = {}


def variant_from_c(variant: C.df_variant) -> DataflowHandlerVariantKey:
    """A cached Python variant key for a C variant (plans share few keys)."""
    key = bytes(variant)
    found = _VARIANT_CACHE.get(key)
    if found is None:
        found = DataflowHandlerVariantKey.from_c(variant)
        if len(_VARIANT_CACHE) < 4096:
            _VARIANT_CACHE[key] = found
    return found


def identity_from_c(ident: C.df_identity) -> DataflowHandlerIdentity:
    key = bytes(ident)
    found = _IDENTITY_CACHE.get(key)
    if found is None:
        found = DataflowHandlerIdentity.from_c(ident)
        if len(_IDENTITY_CACHE) < 4096:
            _IDENTITY_CACHE[key] = found
    return found
