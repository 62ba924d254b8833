"""Built-in library handlers (``library=``) and implementations by
capability region (``T.implementation``, df.compile's ``arch`` /
``replacements``) from Python: the seed attention with df's lse_combine and
copy runs on the host backend against the float64 reference (and a GQA
intermediate {lse[4], o[4][128]}), the implementation selection chose per
instruction shows in the plan, the packed handler table, its dump and its
blob, and every refusal (selection, library names, unsuitable
intermediates, bad regions) raises an exception carrying df's message."""

from __future__ import annotations

import array
import math
import random
import struct

import pytest

import dataflow as df
import dataflow.language as T
from dataflow import toolchain

from attention_data import HANDLERS, REPO, AttentionData
from test_dataflow_runtime import AttnInter

pytestmark = [pytest.mark.needs_compiler,
              pytest.mark.skipif(toolchain.find_clang() is None, reason="clang-22 not found")]

IMPLS = REPO / "examples" / "seed" / "attention_impls.c"
GQA = REPO / "python-bindings" / "tests" / "handlers" / "gqa_split_kv.c"
SEED = dict(topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128,
            task_extents=(2,))
LENGTHS = {"kv": [384, 200]}
# every partial a 4-tile call (iter-range buckets of 4 tiles of 8 keys)
TILES = dict(topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=32,
             task_extents=(2,), iter_range_buckets=[4], iter_range_bucket_size=8)


@T.dataflow_intermediate
class NoLse:  # no lse field: unsuitable for lse_combine
    m: T.float32
    o: T.Tensor((2, 8), T.float16)


@T.dataflow_intermediate
class IntPayload:  # an integer payload: unsuitable for lse_combine
    lse: T.float32
    o: T.Tensor((16,), T.int32)


def library_ops(split_source=HANDLERS):
    """split_kv in C, combine and finalize from df's handler library."""

    @T.dataflow.iter(range=("kv_begin", "kv_end"),
                     source=str(split_source) if split_source else None)
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    @T.dataflow.reduce(library="lse_combine")
    def combine(items: list[AttnInter]) -> AttnInter: ...

    @T.dataflow.finalize(library="copy")
    def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    return split_kv, combine, finalize


def attention(split_kv, combine, finalize):
    return (T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "seq_lens"},
                               name="attention")
            .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"), range_axis="kv")
            .reduce(combine()).finalize(finalize(Output="O")))


def with_impls(*regions):
    """The seed with split_kv implemented by attention_impls.c's symbols for
    ``regions`` ((symbol, keywords), ...)."""
    split_kv, combine, finalize = library_ops(split_source=None)
    for symbol, kw in regions:
        T.implementation(of=split_kv, name=symbol, source=IMPLS, **kw)(lambda ctx: None)
    return attention(split_kv, combine, finalize)


SEED_IMPLS = (("split_kv_len128", dict(length=128)),
              ("split_kv_tiles4", dict(tiles=4, min_arch="sm_90")),
              ("split_kv_general", dict(general=True)))


@pytest.fixture(scope="module")
def data():
    return AttentionData()


def clear(output):
    output[:] = array.array("f", [0.0] * len(output))


def split_impls(plan):
    return [(i.task_range, i.implementation) for i in plan.instructions
            if i.operator_name == "split_kv"]


# ---- built-in library handlers ------------------------------------------------------------

def test_library_handlers_run_on_the_host_backend(data):
    art = df.compile(attention(*library_ops()), "sm_90a", range_lengths=LENGTHS, **SEED)
    assert ".target sm_90a" in art.ptx and ".entry df_persistent_kernel" in art.ptx
    packed = art.packed
    # 3 partials of task 0 reduce with the generic entry, 2 of task 1 with the binary one
    assert tuple(zip(packed.handler_names, packed.handler_implementations)) == (
        ("split_kv", None), ("combine", "df_lib_lse_combine_generic"),
        ("finalize", "df_lib_copy"), ("combine", "df_lib_lse_combine_binary"))
    assert 'df.library = "lse_combine"' in art.program.to_mlir()
    clear(data.O)
    result = art.launch(data.Q, data.K, data.V, data.O, backend="host")
    assert result.backend == "host"
    assert data.max_error([384, 200]) < 1e-3
    # a re-plan selects again (the single partial of 128 keys: the passthrough entry)
    clear(data.O)
    result = art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [300, 128]},
                        backend="host")
    assert result.replanned and data.max_error([300, 128]) < 1e-3
    assert "df_lib_lse_combine_passthrough" in art.packed.handler_implementations


def test_library_handler_errors_carry_dfs_message():
    split_kv, combine, finalize = library_ops()

    @T.dataflow.reduce(library="softmax_merge")
    def unknown(items: list[AttnInter]) -> AttnInter: ...

    with pytest.raises(df.DataflowProgramError,
                       match=r"operator 'unknown' names built-in handler 'softmax_merge', which "
                             r"df does not have \(built-in handlers: lse_combine, copy\)"):
        attention(split_kv, unknown, finalize).validate()

    @T.dataflow.finalize(library="lse_combine")
    def wrong_kind(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    with pytest.raises(df.DataflowProgramError,
                       match="operator 'wrong_kind' is a finalize but built-in handler "
                             "'lse_combine' implements a reduce"):
        attention(split_kv, combine, wrong_kind).validate()

    @T.dataflow.iter(range=("kv_begin", "kv_end"))
    def split2(seq: T.int32, head: T.int32, Q, K, V) -> NoLse: ...

    @T.dataflow.reduce(library="lse_combine")
    def combine2(items: list[NoLse]) -> NoLse: ...

    @T.dataflow.finalize
    def finalize2(inter: NoLse, seq: T.int32, head: T.int32, Output) -> None: ...

    with pytest.raises(df.DataflowProgramError,
                       match="operator 'combine2' uses built-in handler 'lse_combine', which "
                             "needs intermediate 'NoLse' to have"):
        attention(split2, combine2, finalize2).validate()

    @T.dataflow.iter(range=("kv_begin", "kv_end"))
    def split3(seq: T.int32, head: T.int32, Q, K, V) -> IntPayload: ...

    @T.dataflow.reduce(library="lse_combine")
    def combine3(items: list[IntPayload]) -> IntPayload: ...

    @T.dataflow.finalize
    def finalize3(inter: IntPayload, seq: T.int32, head: T.int32, Output) -> None: ...

    with pytest.raises(df.DataflowProgramError,
                       match=r"field 'IntPayload.o' must be float16, bfloat16 or float32, "
                             r"not int32"):
        attention(split3, combine3, finalize3).validate()


# ---- GQA: {lse[4], o[4][128]} -------------------------------------------------------------

@T.dataflow_intermediate
class GqaInter:
    lse: T.Tensor((4,), T.float32)
    o: T.Tensor((4, 128), T.float16)


def test_gqa_intermediate_with_library_handlers():
    heads, dim, stride, tasks = 4, 128, 512, 2
    lengths = [300, 130]

    @T.dataflow.iter(range=("kv_begin", "kv_end"), source=str(GQA))
    def gqa_split_kv(group: T.int32, Q, K, V) -> GqaInter: ...

    @T.dataflow.reduce(library="lse_combine")
    def gqa_combine(items: list[GqaInter]) -> GqaInter: ...

    @T.dataflow.finalize(library="copy")
    def gqa_finalize(inter: GqaInter, group: T.int32, Output) -> None: ...

    program = (T.dataflow_program(task_domain=("group",), dynamic_ranges={"kv": "seq_lens"},
                                  name="gqa")
               .partial(gqa_split_kv(Q="Q", K="K", V="V"), task_args=("group",),
                        range_axis="kv")
               .reduce(gqa_combine()).finalize(gqa_finalize(Output="O")))
    art = df.compile(program, "host", range_lengths={"kv": lengths}, task_extents=(tasks,),
                     topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128)
    assert "df_lib_copy" in art.packed.handler_implementations
    rng = random.Random(7)
    q = [[[rng.uniform(-1, 1) for _ in range(dim)] for _ in range(heads)] for _ in range(tasks)]
    k = [[[rng.uniform(-1, 1) for _ in range(dim)] for _ in range(stride)] for _ in range(tasks)]
    v = [[[rng.uniform(-1, 1) for _ in range(dim)] for _ in range(stride)] for _ in range(tasks)]

    def tensor(rows, shape):
        flat = [x for a in rows for b in a for x in b]
        return df.HostTensor(bytearray(struct.pack(f"<{len(flat)}f", *flat)), "float32", shape)

    out = array.array("f", [0.0] * (tasks * heads * dim))
    art.launch(Q=tensor(q, (tasks, heads, dim)), K=tensor(k, (tasks, stride, dim)),
               V=tensor(v, (tasks, stride, dim)),
               O=df.HostTensor(out, "float32", (tasks, heads * dim)), backend="host")
    worst = 0.0
    for t, n in enumerate(lengths):
        for h in range(heads):
            s = [sum(q[t][h][d] * k[t][j][d] for d in range(dim)) / math.sqrt(dim)
                 for j in range(n)]
            m = max(s)
            w = [math.exp(x - m) for x in s]
            z = sum(w)
            for d in range(dim):
                ref = sum(w[j] * v[t][j][d] for j in range(n)) / z
                worst = max(worst, abs(out[(t * heads + h) * dim + d] - ref))
    assert worst < 2e-3  # float16 partials


# ---- implementations by capability region --------------------------------------------------

def test_implementations_are_selected_per_region(data):
    program = with_impls(*SEED_IMPLS)
    assert '"func.func"() <{function_type = (!llvm.ptr) -> (), sym_name = "split_kv_tiles4"' \
        in program.to_mlir()
    art = df.compile(program, "sm_90a", range_lengths=LENGTHS, **SEED)
    # 128-key partials run the length-128 implementation, the 72-key tail the general one
    assert split_impls(art.plan) == [((0, 128), "split_kv_len128"),
                                     ((128, 256), "split_kv_len128"),
                                     ((256, 384), "split_kv_len128"),
                                     ((0, 128), "split_kv_len128"),
                                     ((128, 200), "split_kv_general")]
    packed = art.packed
    chosen = set(zip(packed.handler_names, packed.handler_implementations))
    assert ("split_kv", "split_kv_len128") in chosen and ("split_kv", "split_kv_general") in chosen
    assert not any(impl == "split_kv_tiles4" for impl in packed.handler_implementations)
    dump = art.plan.dump()
    assert "impl=split_kv_len128" in dump and "impl=df_lib_copy" in dump
    assert any(h.get("impl") == "split_kv_general" for h in packed.dump_json()["handlers"])
    # the kernel links only the chosen implementations
    assert "df_example_ran_len128" in art.ptx and "df_example_ran_general" in art.ptx
    assert "df_example_ran_tiles4" not in art.ptx
    # the blob keeps the choices
    again = df.PackedInstructionPlan.from_blob(art.blob)
    assert again.handler_implementations == packed.handler_implementations
    clear(data.O)
    art.launch(data.Q, data.K, data.V, data.O, backend="host")
    assert data.max_error([384, 200]) < 1e-3


def test_plan_round_trips_the_chosen_implementations():
    plan = df.schedule(with_impls(*SEED_IMPLS), range_lengths=LENGTHS, **SEED)
    packed = df.pack_instruction_plan(plan)
    impls = {i.implementation for i in plan.instructions}
    assert {"split_kv_len128", "split_kv_general", "df_lib_copy"} <= impls
    # an instruction's implementation goes back to C with the plan
    by_id = {i.instruction_id: i for i in plan.instructions}
    general = next(i for i in plan.instructions if i.implementation == "split_kv_general")
    assert by_id[general.instruction_id].implementation == "split_kv_general"
    assert "split_kv_general" in packed.handler_implementations


def test_architecture_filters_implementations():
    program = with_impls(*SEED_IMPLS)
    sm90 = df.schedule(program, range_lengths=LENGTHS, arch="sm_90", **TILES)
    # 4-tile partials run the 4-tile implementation; the 8-key tail the general one
    assert {impl for _, impl in split_impls(sm90)} == {"split_kv_tiles4", "split_kv_general"}
    assert all(impl == "split_kv_tiles4" for rng, impl in split_impls(sm90)
               if rng[1] - rng[0] == 32)
    sm80 = df.schedule(program, range_lengths=LENGTHS, arch="sm_80", **TILES)
    assert "split_kv_tiles4" not in {impl for _, impl in split_impls(sm80)}
    # df.compile selects for its target
    art = df.compile(program, "sm_90", range_lengths=LENGTHS, **TILES)
    assert ".target sm_90" in art.ptx and "df_example_ran_tiles4" in art.ptx
    host = df.compile(program, "host", arch="sm_80", range_lengths=LENGTHS, **TILES)
    assert "split_kv_tiles4" not in host.packed.handler_implementations
    # sm_80 selects, but df's kernel needs sm_90: code generation refuses it
    with pytest.raises(df.DataflowError, match="target sm_80 is refused"):
        df.compile(program, "sm_80", range_lengths=LENGTHS, **TILES)
    with pytest.raises(df.DataflowValueError, match="unknown architecture 'sm_75'"):
        df.schedule(program, range_lengths=LENGTHS, arch="sm_75", **SEED)


def test_replacements_shadow_the_programs_implementations(data):
    program = with_impls(*SEED_IMPLS)
    plan = df.schedule(program, range_lengths=LENGTHS,
                       replacements=["split_kv=split_kv_general:general"], **SEED)
    assert {impl for _, impl in split_impls(plan)} == {"split_kv_general"}
    mine = T.Implementation("split_kv_general", "split_kv", general=True, source=IMPLS)
    assert mine.spec == "split_kv=split_kv_general:general"
    art = df.compile(attention(*library_ops(split_source=None)), "host", replacements=[mine],
                     range_lengths=LENGTHS, **SEED)
    assert {impl for _, impl in split_impls(art.plan)} == {"split_kv_general"}
    clear(data.O)
    art.launch(data.Q, data.K, data.V, data.O)
    assert data.max_error([384, 200]) < 1e-3
    # re-plans keep the replacement
    art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [256, 100]})
    assert {impl for _, impl in split_impls(art.plan)} == {"split_kv_general"}
    assert data.max_error([256, 100]) < 1e-3


def recorded_selection(blob: bytes) -> tuple:
    """(select_arch, [(name, origin)]) of the program a plan blob carries."""
    import ctypes

    from dataflow import _ctypes as C

    packed = df.load_packed_plan(blob)
    prog = ctypes.cast(packed.embedded_program.ptr, ctypes.POINTER(C.df_program)).contents
    impls = ctypes.cast(prog.impls, ctypes.POINTER(C.df_impl))
    return prog.select_arch, [(impls[i].name.decode(), impls[i].origin)
                              for i in range(prog.impl_count)]


def test_blobs_record_the_selection_for_run_time_replans():
    program = with_impls(*SEED_IMPLS)
    art = df.compile(program, "host", arch="sm_90", replacements=["split_kv=mine:general"],
                     range_lengths=LENGTHS, **SEED)
    arch, impls = recorded_selection(art.blob)
    assert arch == 90  # DF_ARCH_SM90
    assert impls == [("split_kv_len128", 0), ("split_kv_tiles4", 0), ("split_kv_general", 0),
                     ("mine", 2)]  # program ones, then the replacement
    # the program itself is left as declared: without the replacement its
    # own implementations serve
    plain = df.schedule(program, range_lengths=LENGTHS, **SEED)
    assert {impl for _, impl in split_impls(plain)} == {"split_kv_len128", "split_kv_general"}
    # the re-planned blob of new lengths records it too
    art.replan({"kv": [256, 100]})
    assert recorded_selection(art.blob)[1][-1] == ("mine", 2)
    # libdfrt re-plans the blob without giving the selection twice
    options, _keep = art._schedule_options()
    assert not options.select
    # a replacement with a program implementation's symbol stands in its entry
    art = df.compile(program, "host", replacements=["split_kv=split_kv_general:general"],
                     range_lengths=LENGTHS, **SEED)
    assert recorded_selection(art.blob) == (0, [("split_kv_len128", 0), ("split_kv_tiles4", 0),
                                                ("split_kv_general", 2)])


def test_selection_errors_carry_dfs_message():
    ambiguous = with_impls(("split_kv_len128", dict(length=128)),
                           ("split_kv_tiles4", dict(length=128)),
                           ("split_kv_general", dict(general=True)))
    with pytest.raises(df.DataflowValueError,
                       match=r"dispatch is ambiguous for operator 'split_kv' \(instruction 0: "
                             r"range length 128, 1 tiles, dtype float16, arch sm_90a\): "
                             r"'split_kv_len128' \[length=128\] \(program\), 'split_kv_tiles4' "
                             r"\[length=128\] \(program\) both serve this call"):
        df.schedule(ambiguous, range_lengths=LENGTHS, **SEED)
    gap = with_impls(("split_kv_len128", dict(length=128)),
                     ("split_kv_general", dict(length=64)))
    with pytest.raises(df.DataflowValueError,
                       match=r"no implementation serves this call to operator 'split_kv' "
                             r"\(instruction \d+: range length 72, 1 tiles, dtype float16, arch "
                             r"sm_90a\); candidates: 'split_kv_len128' \[length=128\] "
                             r"\(program\), 'split_kv_general' \[length=64\] \(program\)"):
        df.schedule(gap, range_lengths=LENGTHS, **SEED)
    # the error reaches df.compile's caller too
    with pytest.raises(df.DataflowValueError, match="no implementation serves this call"):
        df.compile(gap, "host", range_lengths=LENGTHS, **SEED)
    program = with_impls(*SEED_IMPLS)
    with pytest.raises(df.DataflowValueError,
                       match=r"the kernel supplied for operator 'split_kv' does not serve this "
                             r"call \(instruction \d+: range length 72, .*supplied: 'mine' "
                             r"\[length=128\] \(replacement\); a replacement is never stood in "
                             r"for"):
        df.schedule(program, range_lengths=LENGTHS, replacements=["split_kv=mine:length=128"],
                    **SEED)
    with pytest.raises(df.DataflowValueError,
                       match="the kernel supplied for operator 'attn' \\('mine'\\) replaces "
                             "nothing: program 'attention' has no such operator"):
        df.schedule(program, range_lengths=LENGTHS, replacements=["attn=mine:general"], **SEED)
    with pytest.raises(df.DataflowValueError,
                       match=r"replacement 'split_kv' must read OPERATOR=SYMBOL"):
        df.compile(program, "host", range_lengths=LENGTHS, replacements=["split_kv"], **SEED)
    with pytest.raises(TypeError, match="replacements take"):
        df.schedule(program, range_lengths=LENGTHS, replacements=[3], **SEED)


def test_implementation_declaration_errors():
    split_kv, combine, finalize = library_ops(split_source=None)
    with pytest.raises(df.DataflowValueError,
                       match="implementation 'wide' of 'split_kv' is general but narrows the "):
        T.implementation(of=split_kv, name="wide", general=True, tiles=4)(lambda ctx: None)
    with pytest.raises(df.DataflowValueError, match="give one of tiles= and length="):
        T.Implementation("x", split_kv, tiles=2, length=64)
    with pytest.raises(df.DataflowValueError, match="tiles must be a positive integer"):
        T.Implementation("x", split_kv, tiles=0)
    with pytest.raises(df.DataflowValueError, match="unknown architecture 'sm_70'"):
        T.Implementation("x", split_kv, min_arch="sm_70")
    with pytest.raises(TypeError, match="of= takes the Operator"):
        T.implementation(of="split_kv")
    with pytest.raises(TypeError, match="of= takes the Operator"):
        T.Implementation("x", 3)
    with pytest.raises(TypeError, match="tiles must be an int"):
        T.Implementation("x", split_kv, tiles="4")
    with pytest.raises(TypeError, match="min_arch must be a string"):
        T.Implementation("x", split_kv, min_arch=90)
    with pytest.raises(df.DataflowValueError,
                       match="implementation .x.: Dataflow reduce arity must be a positive"):
        T.Implementation("x", combine, arity=0)
    with pytest.raises(df.DataflowValueError,
                       match="arity must be passthrough, binary or generic, got 'ternary'"):
        T.Implementation("x", combine, arity="ternary")
    with pytest.raises(df.DataflowValueError, match="name '" + "x" * 64 + "' is longer than 63"):
        T.Implementation("x" * 64, combine)
    assert T.Implementation("x", combine, arity=2).region == "arity=binary"
    assert T.Implementation("x", combine, dtype=T.float16).region == "dtype=float16"
    assert T.Implementation.parse("combine=c2:arity=binary,arch=90a").region == \
        "arity=binary,arch=sm_90a"

    @T.implementation(of=split_kv)
    def fast(ctx): ...

    with pytest.raises(df.DataflowValueError, match="'fast' of 'split_kv' is declared twice"):
        T.implementation(of=split_kv, name="fast", general=True)(lambda ctx: None)
    assert split_kv.implementations == (fast,) and fast.region == "any"

    # an implementation named like another operator is refused by df
    T.implementation(of=split_kv, name="combine", general=True)(lambda ctx: None)
    with pytest.raises(df.DataflowProgramError,
                       match="implementation 'combine' of 'split_kv' has the name of another "
                             "operator"):
        attention(split_kv, combine, finalize).validate()


def test_host_backend_cannot_combine_generated_handlers_with_a_shared_object(tmp_path, data):
    so = toolchain.host_library([HANDLERS], tmp_path)
    art = df.compile(attention(*library_ops(split_source=None)), "host", handlers=[so],
                     range_lengths=LENGTHS, **SEED)
    with pytest.raises(df.DataflowCompileError,
                       match="cannot combine handlers generated from the program \\(built-in "
                             "handlers, implementations\\) with the host shared object"):
        art.launch(data.Q, data.K, data.V, data.O)
    with pytest.raises(TypeError, match="arch must be a string"):
        df.schedule(attention(*library_ops()), range_lengths=LENGTHS, arch=90, **SEED)


def test_dtype_and_arity_regions():
    # the seed's payload (AttnInter.o) is float16: the float32 one never applies
    program = with_impls(("split_kv_len128", dict(dtype="float16")),
                         ("split_kv_general", dict(dtype=T.float32)))
    plan = df.schedule(program, range_lengths=LENGTHS, **SEED)
    assert {impl for _, impl in split_impls(plan)} == {"split_kv_len128"}
    # reduce arity classes: a replacement for binary reduces only declines the
    # 3-input one, an arity-3 (generic) one serves it
    with pytest.raises(df.DataflowValueError,
                       match="the kernel supplied for operator 'combine' does not serve"):
        df.schedule(program, range_lengths=LENGTHS, replacements=["combine=c2:arity=binary"],
                    **SEED)
    plan = df.schedule(program, range_lengths=LENGTHS, **SEED, replacements=[
        "combine=c2:arity=binary", T.Implementation("cn", "combine", arity=3)])
    assert {(len(i.input_slots), i.implementation) for i in plan.instructions
            if i.operator_name == "combine"} == {(3, "cn"), (2, "c2")}


def mlir_split_kv(symbol: str, attributes: str = "") -> str:
    """examples/seed/attention_handlers.mlir's split_kv (and its score
    helper) as the body of implementation ``symbol``."""
    from test_mlir_bodies import SPLIT_KV

    head, sep, rest = SPLIT_KV.partition("  func.func @split_kv(%ctx: !llvm.ptr) attributes {")
    assert sep
    rest = rest.split("} {", 1)[1]  # drop the handler's df.* attributes
    return f"{head}  func.func @{symbol}(%ctx: !llvm.ptr){attributes} {{{rest}"


def test_implementation_bodies_as_mlir_text(data):
    split_kv, combine, finalize = library_ops(split_source=None)
    T.implementation(of=split_kv, name="split_kv_mlir128", length=128,
                     mlir=mlir_split_kv("split_kv_mlir128",
                                        " attributes {df.length = 128 : i64}"))(None)
    T.implementation(of=split_kv, name="split_kv_general", general=True, source=IMPLS)(None)
    art = df.compile(attention(split_kv, combine, finalize), "sm_90a", range_lengths=LENGTHS,
                     **SEED)
    assert {impl for _, impl in split_impls(art.plan)} == {"split_kv_mlir128",
                                                           "split_kv_general"}
    assert "func.func" in art.handler_module.text() and \
        'sym_name = "split_kv_mlir128"' in art.handler_module.text()
    assert ".entry df_persistent_kernel" in art.ptx
    # the MLIR length-128 body and the C general one (attention_impls.c) on the host
    clear(data.O)
    art.launch(data.Q, data.K, data.V, data.O, backend="host")
    assert data.max_error([384, 200]) < 1e-3


def test_implementation_mlir_body_errors():
    split_kv, combine, finalize = library_ops(split_source=None)
    with pytest.raises(TypeError, match="one of source= and mlir="):
        T.Implementation("x", split_kv, source=IMPLS, mlir="func.func @x() { return }")
    T.implementation(of=split_kv, name="wrong_region", length=128,
                     mlir=mlir_split_kv("wrong_region", " attributes {df.length = 64 : i64}"))(
                         None)
    program = attention(split_kv, combine, finalize)
    with pytest.raises(df.DataflowHandlerError,
                       match=r"implementation 'wrong_region': the MLIR body's df.length 64 : i64 "
                             r"does not match the declaration's 128 : i64"):
        df.compile(program, "host", range_lengths={"kv": [128, 256]}, **SEED)
    split_kv, combine, finalize = library_ops(split_source=None)
    T.implementation(of=split_kv, name="no_ctx", general=True,
                     mlir="func.func @no_ctx() { return }")(None)
    with pytest.raises(df.DataflowHandlerError,
                       match=r"implementation 'no_ctx': the MLIR body's type must be "
                             r"\(!llvm.ptr\) -> \(\) \(the df_ctx pointer\), got \(\) -> \(\)"):
        df.compile(attention(split_kv, combine, finalize), "host", range_lengths=LENGTHS, **SEED)
    mine = T.Implementation("mine", "split_kv", general=True, mlir="func.func @mine() { return }")
    with pytest.raises(df.DataflowCompileError, match="a replacement's body comes from source="):
        df.compile(attention(*library_ops()), "host", range_lengths=LENGTHS,
                   replacements=[mine], **SEED)
