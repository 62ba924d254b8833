"""df's Python bindings: a ctypes package over libdf.so (plan core, host
backend), libdf_compiler.so (MLIR front end, PTX) and libdfrt.so (CUDA
runtime). Import ``dataflow.language as T`` for the programming surface and
``dataflow as df`` for scheduling, packing, plan inspection, ``df.compile``
and launching; every computation happens in df's C libraries."""

from __future__ import annotations

from ._lib import (DataflowError, DataflowFormatError, DataflowTimeoutError,  # noqa: F401
                   DataflowTypeError, DataflowValueError)
from ._program import DataflowProgram, DataflowProgramError  # noqa: F401
from .artifact import CompiledArtifact, LaunchResult, compile  # noqa: F401,A004
from .abi_schema import (  # noqa: F401
    ABI_VERSION,
    ARG_STRUCT,
    COMM_STRUCT,
    DATAFLOW_CLUSTER_SOURCE_WAIT_ALL,
    DATAFLOW_CLUSTER_SOURCE_WAIT_KEEP_NEWEST,
    DATAFLOW_CLUSTER_SOURCE_WAIT_NONE,
    DATAFLOW_COMM_KIND_ABI_VALUES,
    DATAFLOW_HANDOFF_FLAG_CONSUMER,
    DATAFLOW_HANDOFF_FLAG_DISABLED,
    DATAFLOW_HANDOFF_FLAG_PRODUCER,
    DATAFLOW_HANDOFF_FLAG_TAIL,
    DATAFLOW_OPCODE_ABI_VALUES,
    DATAFLOW_SLOT_FLAG_CLUSTER_GATED_PUSH,
    DATAFLOW_SLOT_FLAG_COMMUNICATE,
    DATAFLOW_SLOT_FLAG_HBM_DIRECT_GLOBAL,
    DATAFLOW_SLOT_FLAG_SCRATCH_BACKED,
    DATAFLOW_TENSOR_ARG_FLAG_CUDA_ARRAY_INTERFACE,
    DATAFLOW_TENSOR_ARG_FLAG_DATA_PTR,
    DATAFLOW_TENSOR_ARG_FLAG_RAW_POINTER,
    DATAFLOW_TENSOR_DTYPE_BFLOAT,
    DATAFLOW_TENSOR_DTYPE_BOOL,
    DATAFLOW_TENSOR_DTYPE_FLOAT,
    DATAFLOW_TENSOR_DTYPE_INT,
    DATAFLOW_TENSOR_DTYPE_UINT,
    DATAFLOW_TENSOR_DTYPE_UNKNOWN,
    INSTRUCTION_STRUCT,
    SLOT_STRUCT,
    TENSOR_ARG_STRUCT,
    UINT32_SENTINEL,
)
from .launch import (DataflowLaunchPackage, DataflowWrapperHandler,  # noqa: F401
                     DataflowWrapperSpec, build_launch_package, build_wrapper_spec)
from .packing import (DataflowBarrierAllocation, PackedInstructionPlan,  # noqa: F401
                      PackedPlan, instruction_plan_fingerprint, load_packed_plan,
                      pack_instruction_plan, plan_dataflow_barriers)
from .plan import (CommPlan, DataflowCommKind, DataflowCommPlan,  # noqa: F401
                   DataflowInstruction, DataflowOpcode, GPUTopology, Instruction,
                   InstructionPlan, SlotPlan)
from .launcher import cuda_available  # noqa: F401
from .schedule import schedule  # noqa: F401
from .tensors import HostTensor  # noqa: F401
from .toolchain import DataflowCompileError  # noqa: F401
from .handler_bodies import DataflowHandlerError  # noqa: F401
from .variants import (  # noqa: F401
    ITER_RANGE_EXACT_LENGTH,
    ITER_RANGE_GENERIC,
    ITER_RANGE_TILE_COUNT,
    REDUCE_ARITY_BINARY,
    REDUCE_ARITY_GENERIC,
    REDUCE_ARITY_PASSTHROUGH,
    DataflowHandlerIdentity,
    DataflowHandlerVariantKey,
    IterRangeSpecialization,
    ReduceAritySpecialization,
)

__version__ = "0.1.0"
