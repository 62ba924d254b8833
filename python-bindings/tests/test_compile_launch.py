"""df.compile and CompiledArtifact.launch: PTX through libdf_compiler, the
seed attention program run end to end on the host backend (no GPU here)
against a float64 reference computed in Python, re-planning for new range
lengths, the tensor kinds launch accepts, and the GPU path (skipped
without a CUDA driver)."""

from __future__ import annotations

import array
import ctypes

import pytest

import dataflow as df
import dataflow.language as T
from dataflow import toolchain
from dataflow._dlpack import DLManagedTensor
from dataflow.tensors import resolve_tensor

from attention_data import HANDLERS, AttentionData
from test_dataflow_runtime import AttnInter, make_program

SEED = dict(topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128,
            task_extents=(2,))
LENGTHS = {"kv": [384, 256]}

needs_clang = pytest.mark.skipif(toolchain.find_clang() is None, reason="clang-22 not found")
pytestmark = pytest.mark.needs_compiler


@pytest.fixture(scope="module")
def artifact():
    if toolchain.find_clang() is None:
        pytest.skip("clang-22 not found")
    return df.compile(make_program().named("attention"), "sm_90a", handlers=[HANDLERS],
                      range_lengths=LENGTHS, **SEED)


@pytest.fixture(scope="module")
def data():
    return AttentionData()


def _expect_backend(result):
    assert result.backend == ("cuda" if df.cuda_available() else "host")


# ---- compile ---------------------------------------------------------------------------

@needs_clang
def test_compile_emits_ptx_bitcode_and_blob(artifact, tmp_path):
    assert ".target sm_90a" in artifact.ptx
    assert ".entry df_persistent_kernel" in artifact.ptx
    assert [b.suffix for b in artifact.bitcode] == [".bc"] and artifact.bitcode[0].is_file()
    blob = artifact.blob
    assert blob[:8] == b"DFPLAN\x00\x01"
    loaded = df.load_packed_plan(blob)
    assert loaded.fingerprint == artifact.packed.fingerprint
    assert loaded.embedded_program_dump() == artifact.program.dump()
    assert artifact.plan.task_range_lengths == (384, 256)
    files = artifact.write(tmp_path / "out")
    assert files["ptx"].read_text() == artifact.ptx
    assert files["plan"].read_bytes() == blob


def test_compile_for_host_only_builds_no_ptx(data):
    art = df.compile(make_program().named("attention"), "host", handlers=str(HANDLERS),
                     range_lengths=LENGTHS, **SEED)
    assert art.ptx is None and art.bitcode == ()
    result = art.launch(data.Q, data.K, data.V, data.O)
    assert result.backend == "host"
    assert data.max_error([384, 256]) < 1e-3
    assert art.host_library.suffix == ".so"


def test_compile_errors(tmp_path):
    program = make_program().named("attention")
    with pytest.raises(ValueError, match="target must be one of"):
        df.compile(program, "sm_75", handlers=[HANDLERS], range_lengths=LENGTHS, **SEED)
    # sm_80 is a selection target (test_implementations.py), but df's kernel
    # needs sm_90: code generation refuses it
    with pytest.raises(df.DataflowError, match="target sm_80 is refused"):
        df.compile(program, "sm_80", handlers=[HANDLERS], range_lengths=LENGTHS, **SEED)
    with pytest.raises(df.DataflowCompileError, match="does not exist"):
        df.compile(program, "host", handlers=[tmp_path / "nope.c"], range_lengths=LENGTHS,
                   **SEED)
    bad = tmp_path / "bad.c"
    bad.write_text("void split_kv(const struct df_ctx *ctx) { return 1 }\n")
    art = df.compile(program, "host", handlers=[bad], range_lengths=LENGTHS, **SEED)
    with pytest.raises(df.DataflowCompileError, match="compiling the host handlers failed"):
        art.host_library
    with pytest.raises(df.DataflowProgramError):
        df.compile(T.dataflow_program(task_domain=()), "host", handlers=[HANDLERS],
                   range_lengths=LENGTHS, **SEED)


@needs_clang
def test_device_compile_errors_carry_the_compiler_output(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int broken( {\n")
    with pytest.raises(df.DataflowCompileError, match=r"compiling .*bad.c for sm_90a failed"):
        df.compile(make_program().named("attention"), "sm_90a", handlers=[bad],
                   range_lengths=LENGTHS, **SEED)


def test_handler_sources_come_from_operator_declarations(data):
    @T.dataflow.iter(range=("kv_begin", "kv_end"), source=str(HANDLERS))
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    @T.dataflow.reduce(source=str(HANDLERS))
    def combine(items: list[AttnInter]) -> AttnInter: ...

    @T.dataflow.finalize(source=str(HANDLERS))
    def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    program = (T.dataflow_program(task_domain=("batch", "head"),
                                  dynamic_ranges={"kv": "seq_lens"}, name="attention")
               .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"),
                        range_axis="kv")
               .reduce(combine()).finalize(finalize(Output="O")))
    art = df.compile(program, "host", range_lengths={"kv": [128, 200]}, **SEED)
    assert art.sources == (HANDLERS.resolve(),)
    art.launch(Q=data.Q, K=data.K, V=data.V, O=data.O)
    assert data.max_error([128, 200]) < 1e-3


def test_unknown_library_names_and_bad_mlir_bodies_are_refused():
    # MLIR bodies are compiled (test_mlir_bodies.py): this one has no df_ctx
    # parameter, so df.compile refuses it naming the operator.
    @T.dataflow.iter(range=("a", "b"), mlir="func.func @split_kv() { return }")
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    from test_dataflow_runtime import combine, finalize

    program = (T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "s"})
               .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"),
                        range_axis="kv").reduce(combine()).finalize(finalize(Output="O")))
    with pytest.raises(df.DataflowHandlerError,
                       match=r"handler 'split_kv': the MLIR body's type must be "
                             r"\(!llvm.ptr\) -> \(\)"):
        df.compile(program, "host", range_lengths=LENGTHS, **SEED)

    # a built-in library handler df does not have (test_implementations.py
    # runs the ones it has)
    @T.dataflow.iter(range=("a", "b"), library="attention_split_kv")
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...  # noqa: F811

    program = (T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "s"})
               .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"),
                        range_axis="kv").reduce(combine()).finalize(finalize(Output="O")))
    with pytest.raises(df.DataflowProgramError,
                       match="operator 'split_kv' names built-in handler 'attention_split_kv', "
                             "which df does not have"):
        df.compile(program, "host", range_lengths=LENGTHS, **SEED)


# ---- launch on the host backend ---------------------------------------------------------

@needs_clang
def test_launch_matches_float_reference(artifact, data):
    data.O[:] = array.array("f", [0.0] * len(data.O))
    result = artifact.launch(data.Q, data.K, data.V, data.O, op_log=True, cost=True)
    _expect_backend(result)
    assert not result.replanned and result.range_lengths == {"kv": [384, 256]}
    assert data.max_error([384, 256]) < 1e-3
    if result.backend == "host":
        stats = result.host
        assert stats.op_count == len(stats.op_log.splitlines()) and stats.steps > 0
        assert stats.cost.startswith("cost model:") and stats.makespan_cycles > 0


@needs_clang
def test_relaunch_with_new_lengths_replans(artifact, data):
    base_fingerprint = artifact.packed.fingerprint
    result = artifact.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [300, 200]})
    assert result.replanned and result.range_lengths == {"kv": [300, 200]}
    assert artifact.plan.task_range_lengths == (300, 200)
    assert artifact.packed.fingerprint != base_fingerprint
    assert data.max_error([300, 200]) < 1e-3
    again = artifact.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [300, 200]})
    assert not again.replanned
    back = artifact.launch(data.Q, data.K, data.V, data.O, range_lengths=LENGTHS)
    assert back.replanned and artifact.packed.fingerprint == base_fingerprint
    assert data.max_error([384, 256]) < 1e-3


@needs_clang
def test_host_threads_give_the_same_numbers(artifact, data):
    out = array.array("f", [0.0] * len(data.O))
    artifact.launch(data.Q, data.K, data.V, out, backend="host", threads=4)
    assert data.max_error([384, 256], out) < 1e-3


@needs_clang
def test_launch_argument_errors(artifact, data):
    with pytest.raises(TypeError, match="missing tensor argument"):
        artifact.launch(data.Q, data.K, data.V)
    with pytest.raises(TypeError, match="'P' is not a tensor argument"):
        artifact.launch(data.Q, data.K, data.V, data.O, P=data.O)
    with pytest.raises(TypeError, match="both by position and by name"):
        artifact.launch(data.Q, data.K, data.V, data.O, Q=data.Q)
    with pytest.raises(ValueError, match="backend must be one of"):
        artifact.launch(data.Q, data.K, data.V, data.O, backend="tpu")

    class OnGpu:
        __cuda_array_interface__ = {"data": (0x1000, False), "shape": (2, 16),
                                    "typestr": "<f4", "version": 3}

    with pytest.raises(ValueError, match="lives on a CUDA device"):
        artifact.launch(data.Q, data.K, data.V, OnGpu(), backend="host")


def test_missing_handler_is_diagnosed(tmp_path, data):
    partial = tmp_path / "partial.c"
    partial.write_text('#include "df/device.h"\n'
                       "void split_kv(const df_ctx *ctx) { (void)ctx; }\n"
                       "void finalize(const df_ctx *ctx) { (void)ctx; }\n")
    art = df.compile(make_program().named("attention"), "host", handlers=[partial],
                     range_lengths=LENGTHS, **SEED)
    with pytest.raises(ValueError, match="combine"):
        art.launch(data.Q, data.K, data.V, data.O)


# ---- tensor kinds ------------------------------------------------------------------------

_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")


class DLPackArray:
    """A host float32 array exporting DLPack, written with ctypes only."""

    def __init__(self, shape):
        count = 1
        for d in shape:
            count *= d
        self.storage = (ctypes.c_float * count)()
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = ctypes.addressof(self.storage)
        t.device.device_type, t.device.device_id = 1, 0
        t.ndim = len(shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        t.shape = self.shape

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), ctypes.addressof(_CAPSULE_NAME), None)


def test_tensor_kinds_resolve():
    ref = resolve_tensor(array.array("f", [0.0] * 6))
    assert (ref.device, ref.dtype.name, ref.shape, ref.strides_bytes, ref.nbytes) == \
        ("cpu", "float32", (6,), (4,), 24)
    assert ref.writable
    ro = resolve_tensor(b"\x00" * 8)
    assert ro.dtype.name == "uint8" and not ro.writable  # copied
    h = resolve_tensor(df.HostTensor(bytearray(64), "bfloat16", (4, 8)))
    assert (h.dtype.name, h.shape, h.strides_bytes) == ("bfloat16", (4, 8), (16, 2))
    with pytest.raises(ValueError, match="buffer holds 64"):
        df.HostTensor(bytearray(64), "float32", (4, 8))
    dl = resolve_tensor(DLPackArray((2, 16)))
    assert (dl.source, dl.device, dl.dtype.name, dl.shape, dl.strides_bytes) == \
        ("dlpack", "cpu", "float32", (2, 16), (64, 4))
    missing = resolve_tensor(None)
    assert missing.missing and missing.record() == bytes(32)
    with pytest.raises(TypeError, match="cannot use a object as a tensor"):
        resolve_tensor(object())

    class TorchLike:
        dtype, shape = "torch.float16", (4, 16)

        class device:
            type, index = "cuda", 1

        def data_ptr(self):
            return 0x2000

        def stride(self):
            return (16, 1)

    t = resolve_tensor(TorchLike())
    assert (t.device, t.device_index, t.strides_bytes, t.nbytes) == ("cuda", 1, (32, 2), 128)
    assert df.TENSOR_ARG_STRUCT.unpack(t.record()) == (
        0x2000, 2, df.DATAFLOW_TENSOR_DTYPE_FLOAT, 16,
        df.DATAFLOW_TENSOR_ARG_FLAG_CUDA_ARRAY_INTERFACE, 0)


@needs_clang
def test_dlpack_output_expect_backend(artifact, data):
    out = DLPackArray((2, 16))
    artifact.launch(data.Q, data.K, data.V, out, backend="host")
    assert data.max_error([384, 256], list(out.storage)) < 1e-3


# ---- GPU --------------------------------------------------------------------------------

@needs_clang
@pytest.mark.needs_gpu
@pytest.mark.needs_dfrt
def test_gpu_launch_and_replan(artifact, data):
    out = array.array("f", [0.0] * len(data.O))
    result = artifact.launch(data.Q, data.K, data.V, out, backend="cuda")
    assert result.backend == "cuda"
    assert data.max_error([384, 256], out) < 2e-3
    result = artifact.launch(data.Q, data.K, data.V, out, backend="cuda",
                             range_lengths={"kv": [300, 200]})
    assert result.replanned
    assert data.max_error([300, 200], out) < 2e-3
    artifact.launch(data.Q, data.K, data.V, out, backend="cuda", range_lengths=LENGTHS)
    assert data.max_error([384, 256], out) < 2e-3


class _FakeSession:
    """Stands in for a CUDA session: records the kernel and plan blob it
    was made with and the re-plans it is asked for."""

    made: list = []

    def __init__(self, ptx, blob, *, block_size, device=0):
        self.ptx, self.blob, self.device_name = ptx, blob, "fake GPU"
        self.replans = 0
        self.patch_calls: list = []
        self.patchable = False
        _FakeSession.made.append(self)

    def set_plan(self, options):
        self.replans += 1

    def patch(self, lengths, block_size):
        self.patch_calls.append(list(lengths))
        return self.patchable

    def launch(self, refs, *, synchronize=True):
        pass

    def close(self):
        pass


def _fake_gpu_artifact(monkeypatch):
    """The launcher module with _FakeSession standing in for the CUDA
    session, and the seed attention compiled for LENGTHS."""
    from dataflow import launcher

    monkeypatch.setattr(launcher, "CudaSession", _FakeSession)
    monkeypatch.setattr(launcher, "runtime_context", lambda: 1)
    _FakeSession.made = []
    art = df.compile(make_program().named("attention"), "sm_90a", handlers=[HANDLERS],
                     range_lengths=LENGTHS, **SEED)
    return launcher, art


@needs_clang
def test_gpu_new_lengths_patch_before_replanning(monkeypatch, data):
    """New lengths for as many tasks first patch the running plan
    (CudaSession.patch) without scheduling in Python; only where it
    refuses does the session re-plan.
    Another task count or axis re-plans without asking."""
    launcher, art = _fake_gpu_artifact(monkeypatch)
    art.launch(data.Q, data.K, data.V, data.O)
    s = _FakeSession.made[0]
    assert s.patch_calls == [] and s.replans == 0
    art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [300, 200]})
    assert s.patch_calls == [[300, 200]] and s.replans == 1  # refused: re-planned
    s.patchable = True
    planned = []
    plan_pair = art._plan_pair
    monkeypatch.setattr(art, "_plan_pair", lambda key: planned.append(key) or plan_pair(key))
    result = art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [301, 201]})
    assert result.replanned and s.patch_calls[-1] == [301, 201] and s.replans == 1
    assert planned == []  # patched: nothing scheduled in Python
    art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [301, 201]})
    assert len(s.patch_calls) == 2  # the same lengths: nothing to do
    one = (("kv", (1, 2)),)
    assert launcher._patchable(one, (("kv", (3, 4)),))
    assert not launcher._patchable(one, (("kv", (3, 4, 5)),))  # another task count
    assert not launcher._patchable(one, (("q", (3, 4)),))  # another axis
    assert not launcher._patchable(None, one)
    assert not launcher._patchable(one + (("q", (1,)),), one + (("q", (2,)),))  # two axes


_FAKE_CUDA_RUN = r"""
import sys
sys.path[:0] = sys.argv[1:3]
import dataflow as df
from dataflow import launcher
from attention_data import HANDLERS, AttentionData
from test_compile_launch import LENGTHS, SEED, make_program

art = df.compile(make_program().named("attention"), "sm_90a", handlers=[HANDLERS],
                 range_lengths=LENGTHS, **SEED)
d = AttentionData()
sets = []
set_plan = launcher.CudaSession.set_plan
launcher.CudaSession.set_plan = lambda self, o: sets.append(1) or set_plan(self, o)
art.launch(d.Q, d.K, d.V, d.O, backend="cuda")
art.launch(d.Q, d.K, d.V, d.O, backend="cuda", range_lengths={"kv": [300, 200]})
session = art._sessions[0][0]
assert sets == [] and session.lengths_key == art._key, (sets, session.lengths_key)
art.launch(d.Q, d.K, d.V, d.O, backend="cuda", range_lengths={"kv": [385, 200]})
assert sets == [1], sets  # task 0 crossed a block boundary: re-planned
print("fake-cuda ok")
"""


@needs_clang
@pytest.mark.needs_dfrt
def test_patch_on_a_fake_driver(tmp_path):
    """CudaSession.patch through libdfrt's real entry point on the test
    suite's fake libcuda.so (the kernel computes nothing): the decode step
    patches without set_plan, a block-boundary crossing re-plans."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    lib = os.environ.get("DF_LIB_DIR")
    fake = Path(lib).parents[1] / "test" / "runtime" / "libdfrt_fake_cuda.so" if lib else None
    if fake is None or not fake.exists():
        pytest.skip("the fake libcuda.so (build/test/runtime) was not built")
    (tmp_path / "libcuda.so.1").symlink_to(fake)
    env = dict(os.environ, LD_LIBRARY_PATH=f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    here = Path(__file__).resolve()
    run = subprocess.run([sys.executable, "-c", _FAKE_CUDA_RUN, str(here.parents[1]),
                          str(here.parent)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "fake-cuda ok" in run.stdout, run.stdout + run.stderr


@needs_clang
def test_gpu_replan_recompiles_for_missing_variants(monkeypatch, data):
    """Lengths giving a task a single partial need a passthrough reduce the
    compiled kernel lacks: the launcher compiles a kernel for that plan and
    keeps both; lengths the first kernel covers re-plan on it."""
    launcher, art = _fake_gpu_artifact(monkeypatch)
    art.launch(data.Q, data.K, data.V, data.O)
    first = _FakeSession.made[0]
    assert first.ptx == art.ptx and first.blob == art.blob and first.replans == 0
    art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [300, 200]})
    assert len(_FakeSession.made) == 1 and first.replans == 1
    art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [1000, 64]})
    assert len(_FakeSession.made) == 2
    second = _FakeSession.made[1]
    assert second.blob == art.blob != first.blob  # compiled for the [1000, 64] plan
    art.launch(data.Q, data.K, data.V, data.O, range_lengths=LENGTHS)
    assert len(_FakeSession.made) == 2 and first.replans == 2
    given = df.compile(make_program().named("attention"), "sm_90a", ptx=art.ptx,
                       handlers=[art.host_library], range_lengths=LENGTHS, **SEED)
    assert given.ptx == art.ptx and given.bitcode == ()
    with pytest.raises(df.DataflowCompileError, match="lacks"):
        given.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [1000, 64]})
