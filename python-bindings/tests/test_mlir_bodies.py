"""Handler bodies given as MLIR text (``mlir=``): df.compile merges them
into the program's module (df_module_add_handler_body through
libdf_compiler) and code generation lowers them, for the GPU (PTX) and the
host backend, where the seed attention program runs against a float64
reference. Bodies are those of examples/seed/attention_handlers.mlir; a mix
with C sources, re-planning, and every refusal (bad text, a signature that
differs from the operator's declaration, clashing helpers, handler files
the host cannot combine with MLIR) are covered."""

from __future__ import annotations

import re

import pytest

import dataflow as df
import dataflow.language as T
from dataflow import _lib, toolchain
from dataflow import compiler as df_compiler

from attention_data import REPO, AttentionData
from test_dataflow_runtime import AttnInter

pytestmark = pytest.mark.needs_compiler

EXAMPLE = REPO / "examples" / "seed" / "attention_handlers.mlir"
SEED = dict(topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128,
            task_extents=(2,))
LENGTHS = {"kv": [384, 256]}

# finalize without df.* attributes: they come from the operator's declaration.
FINALIZE = """
func.func @finalize(%ctx: !llvm.ptr) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : i32
  %c16 = arith.constant 16 : index
  %t = "df.ctx_task_id"(%ctx) : (!llvm.ptr) -> index
  %in = "df.ctx_input"(%ctx, %c0) {field = "o"} : (!llvm.ptr, index) -> memref<16xf16>
  %out = "df.ctx_tensor"(%ctx, %c3) : (!llvm.ptr, i32) -> memref<?x16xf32>
  %tid = "df.ctx_thread"(%ctx) : (!llvm.ptr) -> index
  %nth = "df.ctx_threads"(%ctx) : (!llvm.ptr) -> index
  scf.for %d = %tid to %c16 step %nth {
    %x = memref.load %in[%d] : memref<16xf16>
    %f = arith.extf %x : f16 to f32
    memref.store %f, %out[%t, %d] : memref<?x16xf32>
  }
  return
}
"""

# finalize in C, for programs mixing MLIR and C bodies.
FINALIZE_C = """
#include "df/device.h"
typedef struct { float lse; _Float16 o[16]; } attn_inter;
void finalize(const df_ctx *ctx) {
  const attn_inter *in = df_ctx_input(ctx, 0);
  float *o = (float *)df_ctx_tensor(ctx, 3) + df_ctx_task_id(ctx) * 16;
  for (uint32_t d = df_ctx_thread(ctx); d < 16; d += df_ctx_threads(ctx))
    o[d] = (float)in->o[d];
}
"""


def example(*names: str) -> str:
    """The func.func definitions ``names`` of the example, as text."""
    lines = EXAMPLE.read_text().splitlines()
    out, keep = [], False
    for line in lines:
        m = re.match(r"  func\.func (?:private )?@(\w+)\(", line)
        if m:
            keep = m.group(1) in names
        if keep:
            out.append(line)
            if line == "  }":
                keep = False
    assert out, names
    return "\n".join(out) + "\n"


SPLIT_KV = example("score", "split_kv")
COMBINE = example("combine")


def program(split=SPLIT_KV, combine_body=COMBINE, finalize_body=FINALIZE,
            finalize_source=None):
    @T.dataflow.iter(range=("kv_begin", "kv_end"), mlir=split)
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    @T.dataflow.reduce(mlir=combine_body)
    def combine(items: list[AttnInter]) -> AttnInter: ...

    if finalize_source is not None:
        @T.dataflow.finalize(source=str(finalize_source))
        def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...
    else:
        @T.dataflow.finalize(mlir=finalize_body)
        def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    return (T.dataflow_program(task_domain=("batch", "head"),
                               dynamic_ranges={"kv": "seq_lens"}, name="attention")
            .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"),
                     range_axis="kv")
            .reduce(combine()).finalize(finalize(Output="O")))


def device_runtime() -> bool:
    return bool(_lib.compiler.df_shared_has_device_runtime())


needs_runtime = pytest.mark.skipif("not device_runtime()",
                                   reason="libdf_compiler.so built without the device runtime")
needs_clang = pytest.mark.skipif(toolchain.find_clang() is None, reason="clang-22 not found")


@pytest.fixture(scope="module")
def data():
    return AttentionData()


def clear(output):
    """Zero the output so a check reads what this launch wrote."""
    for i in range(len(output)):
        output[i] = 0.0
    return output


# ---- running ------------------------------------------------------------------------------

@needs_runtime
@pytest.mark.parametrize("threads", [1, 4])
def test_mlir_bodies_run_on_the_host_backend(data, threads):
    art = df.compile(program(), "host", range_lengths=LENGTHS, **SEED)
    assert art.ptx is None and art.sources == () and art.handler_module is not None
    result = art.launch(data.Q, data.K, data.V, clear(data.O), threads=threads)
    assert result.backend == "host" and not result.replanned
    assert data.max_error([384, 256]) < 1e-3


@needs_runtime
def test_mlir_bodies_replan_on_the_host_backend(data):
    art = df.compile(program(), "host", range_lengths=LENGTHS, **SEED)
    art.launch(data.Q, data.K, data.V, clear(data.O))
    assert data.max_error([384, 256]) < 1e-3
    first = art.host_library
    # one partial for the second task: a plan with another handler table
    result = art.launch(data.Q, data.K, data.V, clear(data.O), range_lengths={"kv": [100, 1]})
    assert result.replanned and data.max_error([100, 1]) < 1e-3
    assert art.host_library != first and art.host_library.is_file()
    art.launch(data.Q, data.K, data.V, clear(data.O), range_lengths=LENGTHS)
    assert art.host_library == first and data.max_error([384, 256]) < 1e-3


@needs_runtime
def test_merged_module_holds_the_bodies_with_the_declared_signature():
    art = df.compile(program(), "host", range_lengths=LENGTHS, **SEED)
    text = art.handler_module.text()
    assert art.handler_module.operators == ["split_kv", "combine", "finalize"]
    # bodies replaced the declarations; finalize took df.* from its declaration
    assert 'sym_visibility = "private"}> ({\n  }' not in text
    assert text.count('sym_name = "score"') == 1
    assert re.search(r'df.kind = "finalize", df.params = \["inter", "seq", "head", "Output"\], '
                     r'df.signature = \(!df.inter<"AttnInter">, i32, i32, !df.tensor\) -> \(\)',
                     text)
    # the merged module is a program df reads back as the same program
    assert df_compiler.program_dump_from_mlir(text) == art.program.dump()


@needs_runtime
def test_mlir_bodies_compile_to_ptx_for_sm_90a():
    art = df.compile(program(), "sm_90a", range_lengths=LENGTHS, **SEED)
    ptx = art.ptx
    assert ".target sm_90a" in ptx and ".entry df_persistent_kernel(" in ptx
    # the bodies' math.exp / math.log and f16 <-> f32 conversions, which a
    # kernel whose bodies only return lacks
    empty = df.compile(program(split="func.func @split_kv(%ctx: !llvm.ptr) { return }",
                               combine_body="func.func @combine(%ctx: !llvm.ptr) { return }",
                               finalize_body="func.func @finalize(%ctx: !llvm.ptr) { return }"),
                       "sm_90a", range_lengths=LENGTHS, **SEED).ptx
    for instruction in ("ex2.approx.f32", "lg2.approx.f32", "cvt.f32.f16", "cvt.rn.f16.f32"):
        assert instruction in ptx and instruction not in empty
    # handlers and helpers are inlined into the dispatch: nothing is left to
    # call but the watchdog's cold progress stores (watched entry only)
    calls = re.findall(r"\bcall(?:\.uni)?\s+(\w+)", ptx)
    assert calls and all(c.startswith("df_rt_mark") for c in calls)
    # without a body for finalize (and nothing else defining it) codegen names it
    with pytest.raises(df.DataflowError, match=r"'finalize'.* no implementation"):
        df.compile(program(finalize_source=None, finalize_body=None), "sm_90a",
                   range_lengths=LENGTHS, **SEED)


# ---- MLIR next to C ------------------------------------------------------------------------

@needs_runtime
@needs_clang
def test_mlir_bodies_with_a_c_source(data, tmp_path):
    source = tmp_path / "finalize.c"
    source.write_text(FINALIZE_C)
    art = df.compile(program(finalize_source=source), "sm_90a", range_lengths=LENGTHS,
                     **SEED)
    assert art.sources == (source.resolve(),) and art.handler_module.operators == \
        ["split_kv", "combine"]
    assert ".entry df_persistent_kernel(" in art.ptx and "ex2.approx.f32" in art.ptx
    result = art.launch(data.Q, data.K, data.V, clear(data.O), backend="host", threads=2)
    assert result.backend == "host"
    assert data.max_error([384, 256]) < 1e-3
    # a C source that defines a handler an MLIR body defines too is refused
    dup = tmp_path / "dup.c"
    dup.write_text(FINALIZE_C + "void combine(const df_ctx *ctx) { (void)ctx; }\n")
    art = df.compile(program(finalize_source=dup), "host", range_lengths=LENGTHS, **SEED)
    with pytest.raises(df.DataflowError, match="defined both"):
        art.launch(data.Q, data.K, data.V, clear(data.O))


@needs_runtime
def test_host_refuses_handler_files_it_cannot_link_with_mlir(data, tmp_path):
    so = tmp_path / "finalize.so"
    so.write_bytes(b"")
    art = df.compile(program(finalize_source=so), "host", range_lengths=LENGTHS, **SEED)
    with pytest.raises(df.DataflowCompileError, match="cannot combine the MLIR handler bodies "
                                                      "with the host shared object"):
        art.launch(data.Q, data.K, data.V, clear(data.O))
    bc = tmp_path / "finalize.bc"
    bc.write_bytes(b"")
    art = df.compile(program(finalize_source=bc), "host", range_lengths=LENGTHS, **SEED)
    with pytest.raises(df.DataflowCompileError, match="cannot use the nvptx64 bitcode"):
        art.launch(data.Q, data.K, data.V, clear(data.O))


# ---- refusals ------------------------------------------------------------------------------

def compile_error(**bodies) -> df.DataflowHandlerError:
    with pytest.raises(df.DataflowHandlerError) as info:
        df.compile(program(**bodies), "host", range_lengths=LENGTHS, **SEED)
    return info.value


def test_bad_mlir_text_raises_the_parsers_message_and_the_operator():
    bad = FINALIZE.replace("%x = memref.load %in[%d] : memref<16xf16>",
                           "%x = memref.load %in[%d] : memref<16xf16")
    err = compile_error(finalize_body=bad)
    assert err.operator == "finalize" and isinstance(err, df.DataflowCompileError)
    message = str(err)
    assert message.startswith("handler 'finalize': the MLIR body does not parse: ")
    # located in the operator's text
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "memref<16xf16\n" in text + "\n")
    assert re.search(rf"<mlir body of finalize>:{line}:\d+: expected ',' or '>' in memref type",
                     message), message


def test_bad_mlir_text_in_a_multi_function_body_keeps_its_line_numbers():
    bad = SPLIT_KV.replace("%s = arith.mulf %dot, %scale : f32", "%s = arith.mulf %dot : f32")
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "arith.mulf %dot" in text)
    err = compile_error(split=bad)
    assert err.operator == "split_kv"
    assert f"<mlir body of split_kv>:{line}:" in str(err), str(err)


def test_empty_or_non_text_bodies():
    assert "the MLIR body text is empty" in str(compile_error(finalize_body=""))
    with pytest.raises(TypeError, match="mlir= takes MLIR text"):
        program(finalize_body=b"func.func")


def test_signature_mismatch_names_both():
    bad = FINALIZE.replace("func.func @finalize(%ctx: !llvm.ptr) {",
                           "func.func @finalize(%ctx: !llvm.ptr) attributes {\n"
                           "    df.signature = (!df.inter<\"AttnInter\">, i32, !df.tensor) -> ()} {")
    err = compile_error(finalize_body=bad)
    assert err.operator == "finalize"
    assert str(err) == (
        "handler 'finalize': the MLIR body's df.signature (!df.inter<\"AttnInter\">, i32, "
        "!df.tensor) -> () does not match the operator's declaration "
        "(!df.inter<\"AttnInter\">, i32, i32, !df.tensor) -> ()")


def test_kind_and_params_mismatch_name_both():
    bad = COMBINE.replace('df.kind = "reduce"', 'df.kind = "map"')
    assert "df.kind \"map\" does not match the operator's declaration \"reduce\"" in \
        str(compile_error(combine_body=bad))
    bad = COMBINE.replace('df.params = ["items"]', 'df.params = ["parts"]')
    assert "df.params [\"parts\"] does not match the operator's declaration [\"items\"]" in \
        str(compile_error(combine_body=bad))


def test_body_type_must_take_the_context_pointer():
    bad = FINALIZE.replace("func.func @finalize(%ctx: !llvm.ptr) {",
                           "func.func @finalize(%ctx: !llvm.ptr, %n: i32) {")
    message = str(compile_error(finalize_body=bad))
    assert "handler 'finalize': the MLIR body's type must be (!llvm.ptr) -> ()" in message
    assert "got (!llvm.ptr, i32) -> ()" in message
    assert "(!df.inter<\"AttnInter\">, i32, i32, !df.tensor) -> ()" in message


def test_text_must_define_the_handler_and_only_functions():
    err = compile_error(finalize_body=FINALIZE.replace("@finalize", "@finalise"))
    assert str(err) == "handler 'finalize': its MLIR text defines no func.func @finalize " \
                       "with a body"
    with_type = '"df.intermediate"() {sym_name = "X", field_names = ["a"], ' \
                'field_types = [f32]} : () -> ()\n' + FINALIZE
    assert "its MLIR text holds 'df.intermediate'; only func.func" in \
        str(compile_error(finalize_body=with_type))
    assert "also defines @combine as a handler or program" in \
        str(compile_error(finalize_body=FINALIZE + COMBINE))


def test_helpers_shared_alike_clash_when_different():
    # combine's text may carry the same @score as split_kv's
    art = df.compile(program(combine_body=COMBINE + example("score")), "host",
                     range_lengths=LENGTHS, **SEED)
    assert art.handler_module.text().count('sym_name = "score"') == 1
    # or declare it only
    declared = COMBINE + "func.func private @score(memref<?x16xf16>, memref<?x4096x16xf16>, " \
                         "index, index) -> f32\n"
    art = df.compile(program(combine_body=declared), "host", range_lengths=LENGTHS, **SEED)
    assert art.handler_module.text().count('sym_name = "score"') == 1
    other = example("score").replace("%scale = arith.constant 0.25", "%scale = arith.constant 0.5")
    err = compile_error(combine_body=COMBINE + other)
    assert err.operator == "combine"
    assert "defines @score, which the module already has with a different definition" in str(err)
    # a helper may not take a handler's name either
    helper = FINALIZE.replace("func.func @finalize(%ctx: !llvm.ptr) {",
                              "func.func private @split_kv(%ctx: !llvm.ptr) {")
    err = compile_error(combine_body=COMBINE + helper)
    assert "defines @split_kv, the name of a handler or the program" in str(err)


@needs_runtime
def test_lowering_errors_are_located_in_the_operators_text(data):
    bad = SPLIT_KV.replace("math.log %l : f32", "math.erf %l : f32")
    art = df.compile(program(split=bad), "host", range_lengths=LENGTHS, **SEED)
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "math.erf" in text)
    with pytest.raises(df.DataflowError, match=rf"<mlir body of split_kv>:{line}:\d+: "
                                               rf"'math.erf' has no lowering to LLVM"):
        art.launch(data.Q, data.K, data.V, clear(data.O))
    with pytest.raises(df.DataflowError, match=rf"<mlir body of split_kv>:{line}:\d+: "
                                               rf"math.erf has no device lowering"):
        df.compile(program(split=bad), "sm_90a", range_lengths=LENGTHS, **SEED)
