"""Tests of the bindings beyond the reference's runtime test: programs built
from Python give the same IR as the lit inputs, bad programs raise with
df-verify's message, plans round-trip through blobs, and the Python path
packs exactly what df-opt + df-translate pack."""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import dataflow as df
import dataflow.language as T
from dataflow import compiler
from dataflow.tensor_args import pack_tensor_arg, pack_tensor_args

from test_dataflow_runtime import (AttnInter, HiddenShard, UpShard, combine, finalize,
                                   make_program, make_reshared_program, split_kv)

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "seed"


def _tool(name: str) -> Path | None:
    lib_dir = os.environ.get("DF_LIB_DIR")
    candidates = [Path(lib_dir).parents[1] / "bin" / name] if lib_dir else []
    candidates.append(REPO / "build" / "bin" / name)
    return next((c for c in candidates if c.is_file()), None)


def _run(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    path = _tool(tool)
    if path is None:
        pytest.skip(f"{tool} not built")
    return subprocess.run([str(path), *args], input=stdin, capture_output=True, text=True)


# ---- IR equality with the lit inputs --------------------------------------------------

SEEDS = [("attention", make_program, "attention.mlir"),
         ("moe_reshared", make_reshared_program, "moe_reshared.mlir")]


@pytest.mark.needs_compiler
@pytest.mark.parametrize(("name", "build", "path"), SEEDS)
def test_seed_program_ir_matches_lit_input(name, build, path):
    program = build().named(name)
    text = program.to_mlir()
    lit_text = (SEED / path).read_text()
    # the same program model: dumps through the IR reader agree ...
    assert compiler.program_dump_from_mlir(text) == compiler.program_dump_from_mlir(lit_text)
    # ... with the model's own dump ...
    assert program.dump() == compiler.program_dump_from_mlir(lit_text)
    # ... and IR -> model -> IR of the lit input is the very module Python built
    assert compiler.program_mlir_from_mlir(lit_text) == text


@pytest.mark.needs_compiler
@pytest.mark.parametrize(("name", "build", "path"), SEEDS)
def test_seed_program_ir_round_trips_through_df_opt(name, build, path):
    text = build().named(name).to_mlir()
    first = _run("df-opt", "-", stdin=text)
    assert first.returncode == 0, first.stderr
    second = _run("df-opt", "-", stdin=first.stdout)
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout
    dump = _run("df-translate", "--df-program-dump", "-", stdin=text)
    ref = _run("df-translate", "--df-program-dump", str(SEED / path))
    assert dump.returncode == 0 and dump.stdout == ref.stdout


def test_program_dump_lists_model():
    dump = make_program().named("attention").dump()
    assert dump.startswith("program attention\n")
    assert "intermediate 0 AttnInter slot_bytes=48" in dump
    assert "tensor_args: 0=Q, 1=K, 2=V, 3=O" in dump
    assert make_program().tensor_args == ("Q", "K", "V", "O")
    assert make_reshared_program().tensor_args == ("Input", "W1", "W2", "Output")


def test_intermediate_slot_bytes_come_from_c():
    assert AttnInter.__dataflow_intermediate__.slot_bytes == 48
    assert UpShard.__dataflow_intermediate__.slot_bytes == 16
    assert HiddenShard.__dataflow_intermediate__.slot_bytes == 16
    assert T.DType("half") == T.float16 and T.DType("torch.bfloat16") == T.bfloat16
    with pytest.raises(ValueError):
        T.DType("complex128")


def test_operator_declarations_record_bodies_without_running_them():
    @T.dataflow.map(range=("a", "b"), source="handlers.c")
    def from_c(x: T.int32, A) -> AttnInter:
        raise AssertionError("never runs")

    @T.dataflow.reduce(library="attention_combine")
    def from_library(a: AttnInter, b: AttnInter) -> AttnInter:
        raise AssertionError("never runs")

    @T.dataflow.finalize(mlir="func.func @from_mlir() { return }")
    def from_mlir(inter: AttnInter, Out) -> None:
        raise AssertionError("never runs")

    assert (from_c.body.kind, from_c.body.value) == ("source", "handlers.c")
    assert from_library.body.kind == "library"
    assert from_mlir.body.kind == "mlir"
    assert [p.kind for p in from_c.parameters] == ["scalar", "tensor"]
    assert [p.kind for p in from_library.parameters] == ["inter", "inter"]
    assert from_c.range == ("a", "b")
    with pytest.raises(TypeError, match="at most one"):
        T.dataflow.iter(mlir="x", source="y")(lambda: None)


# ---- bad programs -----------------------------------------------------------------------

def _bad_programs(ir_only: bool = False):
    """(program, df-verify message); the first ones can be written as IR."""
    base = T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "seq_lens"},
                              name="bad")
    in_ir = [
        (base.partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq",), range_axis="kv")
         .reduce(combine()).finalize(finalize(Output="O")),
         "stage 'partial': task_args has 1 entries but the task domain has rank 2"),
        (base.partial(split_kv(), range_axis="kv").reduce(combine())
         .reduce(combine(), name="again").finalize(finalize(Output="O")),
         "handler 'combine' is used by two stages ('reduce' and 'again')"),
        (base.partial(split_kv(Missing="Q"), range_axis="kv").reduce(combine())
         .finalize(finalize(Output="O")),
         "stage 'partial' binds 'Missing', which is not a tensor parameter of handler "
         "'split_kv'"),
        (base.partial(split_kv(), range_axis="nope").reduce(combine())
         .finalize(finalize(Output="O")),
         "stage 'partial': range axis 'nope' is not a declared dynamic range"),
        (T.dataflow_program(task_domain=(), dynamic_ranges={"kv": "s"}, name="bad")
         .partial(split_kv(), range_axis="kv"),
         "program 'bad': task_domain must contain at least one axis"),
    ]
    if ir_only:
        return in_ir
    return in_ir + [
        (base.reduce(combine()), "reduce stage 'reduce' needs a partial stage before it"),
        (base.partial(split_kv(), range_axis="kv").reduce(combine())
         .finalize(finalize(Output="O")).reduce(combine(), name="again"),
         "handler 'combine' is used by two stages ('reduce' and 'again')"),
    ]


@pytest.mark.parametrize(("program", "message"), _bad_programs())
def test_bad_program_raises_df_verify_message(program, message):
    with pytest.raises(df.DataflowProgramError) as err:
        program.validate()
    assert str(err.value) == message
    assert isinstance(err.value, ValueError)
    with pytest.raises(df.DataflowProgramError, match="task_domain|stage|handler"):
        df.schedule(program, topology=df.GPUTopology(sm_count=2), range_lengths={"kv": [8]},
                    block_size=4)


@pytest.mark.needs_compiler
@pytest.mark.parametrize(("program", "message"), _bad_programs(ir_only=True))
def test_bad_program_message_equals_df_verify_on_its_ir(program, message):
    text = program.to_mlir(validate=False)
    with pytest.raises(df.DataflowProgramError) as err:
        compiler.check_mlir_program(text)
    assert str(err.value) == message
    result = _run("df-opt", "-", stdin=text)
    assert result.returncode != 0
    assert f"error: {message}" in result.stderr


def test_builder_rejects_non_calls_and_unknown_inputs():
    with pytest.raises(TypeError, match="handler call"):
        T.dataflow_program(task_domain=("b",)).partial("split_kv")
    program = (T.dataflow_program(task_domain=("b", "h"), dynamic_ranges={"kv": "s"})
               .partial(split_kv(), range_axis="kv").reduce(combine(), input="missing"))
    with pytest.raises(df.DataflowProgramError, match="input 'missing' names no earlier stage"):
        program.validate()


def test_schedule_errors_carry_c_messages():
    topology = df.GPUTopology(sm_count=4, cluster_size=2)
    with pytest.raises(ValueError, match=r"scheduler_policy must be one of \('round_robin', "
                                         r"'cluster_local'\), got 'fastest'"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    scheduler_policy="fastest")
    with pytest.raises(ValueError, match="supports reduce strategies"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    reduce_strategy="streaming")
    with pytest.raises(ValueError, match="block_size must be positive"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=0)
    with pytest.raises(ValueError, match="cluster_size 8 must not exceed sm_count 4"):
        df.GPUTopology(sm_count=4, cluster_size=8)
    with pytest.raises(TypeError):
        df.GPUTopology(sm_count=True)


def test_transfer_tile_bytes_segments_transfers():
    """ceil(48 / 16) = 3 segment records per direction of every transfer."""
    plan = df.schedule(make_program().named("attention"),
                       topology=df.GPUTopology(sm_count=4, cluster_size=2),
                       range_lengths={"kv": [384, 256]}, block_size=128, task_extents=(2,),
                       transfer_tile_bytes=16)
    assert len(plan.comms) == 18
    assert {c.segment_count for c in plan.comms} == {3}
    assert sorted({(c.byte_offset, c.byte_count) for c in plan.comms}) == [(0, 16), (16, 16),
                                                                          (32, 16)]
    with pytest.raises(ValueError, match="transfer_tile_bytes 24 must be a multiple of 16"):
        df.schedule(make_program(), topology=df.GPUTopology(sm_count=4, cluster_size=2),
                    range_lengths={"kv": [384, 256]}, block_size=128, transfer_tile_bytes=24)


def test_schedule_df_extensions_reach_the_c_scheduler():
    """defer_reduces / balance_iters (include/df/plan.h) pass through to df_schedule."""
    topology = df.GPUTopology(sm_count=4, cluster_size=2)
    plain = df.schedule(make_program(), topology=topology, range_lengths={"kv": [8, 16]},
                        block_size=4)
    deferred = df.schedule(make_program(), topology=topology, range_lengths={"kv": [8, 16]},
                           block_size=4, defer_reduces=True, balance_iters=True)
    for sm in range(4):
        ops = [i.opcode.value for i in deferred.queue(sm) if i.opcode.value != "exit"]
        assert ops == sorted(ops, key=lambda op: op != "iter"), ops
    assert [i.opcode.value for i in deferred.queue(0)] == ["iter", "iter", "reduce", "finalize",
                                                           "reduce", "finalize", "exit"]
    assert [i.task_id for i in deferred.instructions][:4] == [1, 1, 1, 1]  # longest task first
    assert plain.instructions[0].task_id == 0
    with pytest.raises(ValueError, match="balance_iters needs scheduler policy 'round_robin'"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    scheduler_policy="cluster_local", balance_iters=True)


def test_block_size_auto_chooses_split():
    """block_size="auto" (df_schedule_options.auto_split): df_split_choose picks block 768
    with balance_iters (longest task first) for kv 384 and 2560 on 4 SMs, as df-opt
    df-schedule block-size=auto does (test/lit/Passes/schedule-split-auto.test)."""
    topology = df.GPUTopology(sm_count=4, cluster_size=2)
    plan = df.schedule(make_program(), topology=topology, range_lengths={"kv": [384, 2560]},
                       block_size="auto")
    assert plan.block_size == 768
    iters = [(i.task_id, *i.task_range) for i in plan.instructions if i.opcode.value == "iter"]
    assert iters[:2] == [(1, 0, 768), (1, 768, 1536)]
    with pytest.raises(ValueError, match="chooses the placement itself"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [384]},
                    block_size="auto", balance_iters=True)
    with pytest.raises(ValueError, match="needs scheduler policy 'round_robin'"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [384]},
                    block_size="auto", scheduler_policy="cluster_local")
    with pytest.raises((TypeError, ValueError)):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [384]},
                    block_size="automatic")


def test_even_split_reaches_the_c_scheduler():
    """even_split (include/df/plan.h): 100 + 300 + 37 keys cut into 4 chunks of ~109, each cut
    moved to a multiple of 16 in its task; sub-options and errors pass through."""
    topology = df.GPUTopology(sm_count=4, cluster_size=2)
    plan = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 300, 37]},
                       block_size=128, even_split=True, even_split_granularity=16)
    iters = [(i.task_id, i.sm_id, *i.task_range) for i in plan.instructions
             if i.opcode.value == "iter"]
    assert iters == [(1, 0, 0, 112), (1, 1, 112, 224), (1, 2, 224, 300), (0, 2, 0, 32),
                     (0, 3, 32, 100), (2, 3, 0, 37)]
    waves = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 300, 37]},
                        block_size=128, even_split=True, even_split_chunks=8)
    assert [i.task_range for i in waves.instructions][:2] == [(0, 54), (54, 109)]
    with pytest.raises(ValueError, match="even_split and balance_iters exclude each other"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    even_split=True, balance_iters=True)
    with pytest.raises(ValueError, match="even_split_task_cost \\(5\\) need even_split"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    even_split_task_cost=5)
    tree = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 40]},
                       block_size=16, reduce_fan_in=3)
    assert [len(i.input_slots) for i in tree.instructions if i.opcode.value == "reduce"] == [2, 2, 3, 3, 3]
    with pytest.raises(ValueError, match="reduce_fan_in must be 0 \\(no limit\\) or at least 2"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    reduce_fan_in=1)
    spread = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 40]},
                         block_size=16, reduce_fan_in=3, reduce_spread=True)
    assert [i.sm_id for i in spread.instructions if i.opcode.value == "reduce"] == [0, 2, 1, 3, 3]
    assert [i.sm_id for i in tree.instructions if i.opcode.value == "reduce"] == [0, 2, 0, 0, 3]
    held = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 40]},
                       block_size=16, reduce_sms=1)
    assert {i.sm_id for i in held.instructions if i.opcode.value == "iter"} == {0, 1, 2}
    assert [i.sm_id for i in held.instructions if i.opcode.value in ("reduce", "finalize")] \
        == [3, 3, 3, 3]
    with pytest.raises(ValueError, match="reduce_sms 4 must leave SMs for the partials"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    reduce_sms=4)
    with pytest.raises(ValueError, match="reduce_spread needs reduce_fan_in"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    reduce_spread=True)
    skip = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 40]},
                       block_size=64, skip_unary_reduce=True)
    assert [(i.opcode.value, i.task_id) for i in skip.instructions if i.opcode.value != "iter"][:3] \
        == [("reduce", 0), ("finalize", 0), ("finalize", 1)]
    with pytest.raises(ValueError, match="skip_unary_reduce needs reduce strategy 'all_at_once'"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    scheduler_policy="cluster_local", reduce_strategy="streaming",
                    skip_unary_reduce=True)
    costed = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 300, 37]},
                         block_size=128, even_split=True, even_split_granularity=16,
                         even_split_task_cost=200)
    assert [i.task_range for i in costed.instructions][:2] == [(0, 64), (64, 300)]
    with pytest.raises(TypeError, match="even_split_chunks must be an int"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    even_split=True, even_split_chunks=2.5)


# ---- the Python path packs what the tools pack ------------------------------------------------

def _seed_plan():
    return df.schedule(make_program().named("attention"),
                       topology=df.GPUTopology(sm_count=4, cluster_size=2),
                       range_lengths={"kv": [384, 256]}, block_size=128, task_extents=(2,))


def test_packed_dump_equals_df_translate_plan_dump():
    scheduled = _run("df-opt", str(SEED / "attention.mlir"),
                     "--df-schedule=sm-count=4 cluster-size=2 block-size=128 "
                     "range-lengths=kv:384,256 task-extents=2")
    assert scheduled.returncode == 0, scheduled.stderr
    ref = _run("df-translate", "--df-plan-dump", "-", stdin=scheduled.stdout)
    assert ref.returncode == 0, ref.stderr
    plan = _seed_plan()
    assert plan.dump() == ref.stdout
    assert df.pack_instruction_plan(plan).fingerprint == df.instruction_plan_fingerprint(plan)


def test_plan_dump_is_text_of_records_and_tables():
    text = _seed_plan().dump()
    assert text.startswith("plan: abi_version=8 sm_count=4 cluster_size=2\n")
    assert "handler 3: name=combine kind=reduce primary=0" in text
    assert "launch_package:" in text and "needs_flag_reset=1" in text


def test_plan_conversion_round_trips_through_c():
    plan = _seed_plan()
    rebuilt = df.InstructionPlan(
        topology=plan.topology, block_size=plan.block_size, range_axis=plan.range_axis,
        scheduler_policy=plan.scheduler_policy, reduce_strategy=plan.reduce_strategy,
        task_extents=plan.task_extents, task_range_lengths=plan.task_range_lengths,
        instructions=plan.instructions, queues=plan.queues, slots=plan.slots, comms=plan.comms)
    assert rebuilt == plan
    assert df.pack_instruction_plan(rebuilt).dump() == plan.dump()


def test_instruction_ids_must_be_dense():
    plan = _seed_plan()
    broken = replace(plan, instructions=plan.instructions[1:])
    with pytest.raises(ValueError, match="instruction ids must be 0..11"):
        df.pack_instruction_plan(broken)


# ---- blobs -------------------------------------------------------------------------------

def _packed_fields(packed):
    return (packed.abi_version, packed.topology, packed.instruction_bytes, packed.slot_bytes,
            packed.comm_bytes, packed.arg_bytes, packed.queue_offsets, packed.queue_lengths,
            packed.input_slots, packed.task_coords, packed.pack_order,
            packed.handler_identities, packed.handler_variant_keys, packed.handler_names,
            packed.handler_symbols, packed.operator_table, packed.operator_kinds,
            packed.intermediate_type_table, packed.shared_slot_bytes,
            packed.global_staging_bytes, packed.scratch_bytes, packed.fingerprint,
            packed.barrier_allocation.barrier_count,
            packed.barrier_allocation.slot_barrier_indices,
            packed.barrier_allocation.comm_barrier_indices,
            packed.barrier_allocation.comm_barrier_phases)


@pytest.mark.parametrize("make", [
    _seed_plan,
    lambda: df.schedule(make_reshared_program().named("moe_reshared"),
                        topology=df.GPUTopology(sm_count=4, cluster_size=2),
                        range_lengths={"expert_tile": [256], "hidden_tile": [256]},
                        block_size=128, task_extents=(1,), include_exit=False,
                        force_hbm_comms=True),
])
def test_plan_round_trips_through_blob(make):
    plan = make()
    packed = df.pack_instruction_plan(plan)
    blob = packed.to_blob()
    assert blob[:8] == b"DFPLAN\x00\x01"
    loaded = df.load_packed_plan(blob)
    assert _packed_fields(loaded) == _packed_fields(packed)
    assert loaded.dump() == packed.dump()
    assert loaded.dump_json() == packed.dump_json()
    assert df.build_launch_package(loaded) == df.build_launch_package(packed)
    assert loaded.embedded_program_dump() == plan.program.dump()
    assert loaded.to_blob() == blob


def test_corrupt_blob_raises_format_error():
    blob = bytearray(df.pack_instruction_plan(_seed_plan()).to_blob())
    blob[40] ^= 0xFF
    with pytest.raises(df.DataflowFormatError, match="plan blob"):
        df.load_packed_plan(bytes(blob))
    with pytest.raises(df.DataflowFormatError):
        df.load_packed_plan(b"DFPLAN")


# ---- variants, records, tensor arguments ---------------------------------------------------

def test_variant_json_is_cs_canonical_form():
    variant = df.DataflowHandlerVariantKey(
        base_identity=df.DataflowHandlerIdentity(0, "iter"),
        typed_specializations=(df.IterRangeSpecialization(df.ITER_RANGE_TILE_COUNT, 4),))
    assert variant.to_dict() == {
        "schema_version": 1,
        "base_identity": {"operator_id": 0, "operator_kind": "iter"},
        "typed_specializations": [{"kind": "iter_range",
                                   "value": {"mode": "tile_count", "value": 4}}],
    }
    assert variant.diagnostic_name("split_kv") == "split_kv__dataflow_iter_tiles_4"
    with pytest.raises(TypeError, match="must be an int, got bool"):
        df.DataflowHandlerIdentity(operator_id=True, operator_kind="iter")
    with pytest.raises(ValueError, match="Unsupported Dataflow handler operator_kind"):
        df.DataflowHandlerIdentity(operator_id=0, operator_kind="scan")
    with pytest.raises(ValueError, match="positive integer or None"):
        df.ReduceAritySpecialization.for_arity(0)


def test_abi_structs_match_the_c_records():
    assert (df.INSTRUCTION_STRUCT.size, df.SLOT_STRUCT.size, df.COMM_STRUCT.size,
            df.ARG_STRUCT.size, df.TENSOR_ARG_STRUCT.size) == (32, 32, 48, 64, 32)
    packed = df.pack_instruction_plan(_seed_plan())
    assert packed.args[0].output_slot == 0
    assert packed.args[2].output_slot == df.UINT32_SENTINEL
    assert struct.unpack_from("<16I", packed.arg_bytes, 0)[8:] == tuple(packed.args[0])[8:]


class _FakeDevice:
    type, index = "cuda", 0


class _FakeTensor:
    """Duck-typed like a torch.Tensor: data_ptr(), dtype, shape, stride()."""

    dtype = "torch.float16"
    shape = (4, 16)
    device = _FakeDevice()

    def data_ptr(self):
        return 0x1000

    def stride(self):
        return (16, 1)


def test_tensor_args_pack_pytorch_style_tensors():
    arg = pack_tensor_arg(_FakeTensor())
    assert df.TENSOR_ARG_STRUCT.unpack(arg.record) == (
        0x1000, 2, df.DATAFLOW_TENSOR_DTYPE_FLOAT, 16, df.DATAFLOW_TENSOR_ARG_FLAG_DATA_PTR, 0)
    assert arg.metadata.strides_bytes == (32, 2)
    raw = pack_tensor_arg(0x2000)
    assert raw.metadata.source == "raw_pointer"
    data, meta = pack_tensor_args(make_program(), {"Q": _FakeTensor(), "K": 16, "V": 32},
                                  allow_missing=True)
    assert len(data) == 4 * df.TENSOR_ARG_STRUCT.size and meta["O"].source == "missing"
    with pytest.raises(TypeError):
        pack_tensor_arg(object())


def test_handler_table_walks_the_plan_list_order():
    """df's C plan keeps instructions in id order; the bindings pass the
    list order to df_pack (df_pack_options.handler_order)."""
    plan = _seed_plan()
    instructions = list(plan.instructions)
    binary = next(i for i in instructions if i.opcode is df.DataflowOpcode.REDUCE
                  and len(i.input_slots) == 2)
    instructions.remove(binary)
    instructions.insert(0, binary)
    packed = df.pack_instruction_plan(replace(plan, instructions=tuple(instructions)))
    assert [v.reduce_arity.arity_class if v.reduce_arity else None
            for v in packed.handler_variant_keys] == [
        df.REDUCE_ARITY_BINARY, None, None, df.REDUCE_ARITY_GENERIC]
    assert [i.operator_kind for i in packed.handler_identities] == [
        "reduce", "iter", "finalize", "reduce"]
    # id order again: the scheduler's numbering comes back
    assert df.pack_instruction_plan(plan).handler_variant_keys[1].reduce_arity.arity_class == \
        df.REDUCE_ARITY_GENERIC


def test_status_codes_map_to_exceptions():
    from dataflow import _ctypes as C
    from dataflow._lib import error_for

    status = C.df_status()
    status.message = b"launch of 'k' ran past 3000 ms"
    for code, kind in ((5, df.DataflowFormatError), (7, df.DataflowTimeoutError),
                       (4, OSError), (3, MemoryError), (1, df.DataflowValueError)):
        status.code = code
        err = error_for(status)
        assert isinstance(err, kind)
        assert "ran past 3000 ms" in str(err)
    assert isinstance(error_for(_timeout(C)), TimeoutError)


def _timeout(C):
    status = C.df_status()
    status.code = 7
    status.message = b"watchdog"
    return status


def test_pool_schedules_and_packs_a_pool():
    topology = df.GPUTopology(sm_count=4, cluster_size=2)
    plan = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100, 40, 300]},
                       block_size=64, pool=True, skip_unary_reduce=True)
    assert plan.pool
    # every transfer through HBM, even a reduce's input from its own SM
    assert {c.kind for c in plan.comms} <= {"hbm_send", "hbm_recv"}
    packed = df.pack_instruction_plan(plan, hbm_direct_global=True)
    pool_op = df.abi_schema.constant("DF_ABI_OP_POOL")
    heads = [packed.instructions[o] for o in packed.queue_offsets]
    assert {h.opcode for h in heads} == {pool_op}
    first, items, stride = heads[0].comm_offset, heads[0].flags, heads[0].task_id
    assert first + items * stride == len(packed.instructions)
    iter_op = df.abi_schema.constant("DF_ABI_OP_ITER")
    reduce_op = df.abi_schema.constant("DF_ABI_OP_REDUCE")
    # dependency order: the 2 + 1 + 5 blocks' ITERs, then the two reduces
    assert [packed.instructions[first + i * stride].opcode for i in range(items)] \
        == [iter_op] * 8 + [reduce_op] * 2
    assert all(packed.instructions[o + 1].opcode == df.abi_schema.constant("DF_ABI_OP_EXIT")
               for o in packed.queue_offsets)
    # the flag survives the plan's round trip through C
    assert df.pack_instruction_plan(plan).instructions[0].opcode == pool_op
    plain = df.schedule(make_program(), topology=topology, range_lengths={"kv": [100]},
                        block_size=64)
    assert not plain.pool
    with pytest.raises(ValueError, match="pool needs scheduler policy 'round_robin'"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    pool=True, scheduler_policy="cluster_local")
    # tapered even-split pieces pool: batches of 4 chunks taking half the
    # rest, down to 64 keys (the C test's cuts: 200 x 4, 100 x 4, then 4)
    tapered = df.schedule(make_program(), topology=topology, range_lengths={"kv": [1000, 600]},
                          block_size=64, pool=True, even_split=True, even_split_taper=50,
                          even_split_taper_min=64)
    assert tapered.pool
    assert sorted(i.task_range[1] - i.task_range[0] for i in tapered.instructions
                  if i.opcode.value == "iter") == [100] * 8 + [200] * 4
    with pytest.raises(ValueError, match="even_split_taper \\(50\\) needs even_split"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    even_split_taper=50)
    with pytest.raises(ValueError, match="1 to 99 \\(0: off\\), got 100"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    even_split=True, even_split_taper=100)
    with pytest.raises(ValueError, match="even_split_taper_min \\(8\\) needs even_split_taper"):
        df.schedule(make_program(), topology=topology, range_lengths={"kv": [8]}, block_size=4,
                    even_split=True, even_split_taper_min=8)
