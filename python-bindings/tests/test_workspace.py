"""Handler workspaces from Python (``workspace_bytes=``, docs/workspace.md):
the declaration reaches the program model (dump), the program IR
(``df.workspace_bytes``) and the compiled kernel, whose
df_handler_workspace_bytes is the largest of the handlers; bad values raise
df's message."""

from __future__ import annotations

import array

import pytest

import dataflow as df
import dataflow.language as T
from dataflow import toolchain

from attention_data import HANDLERS, REPO, AttentionData
from test_dataflow_runtime import AttnInter


def attention(split_ws=None, finalize_ws=None):
    @T.dataflow.iter(range=("kv_begin", "kv_end"), source=str(HANDLERS),
                     workspace_bytes=split_ws)
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    @T.dataflow.reduce(source=str(HANDLERS))
    def combine(items: list[AttnInter]) -> AttnInter: ...

    @T.dataflow.finalize(source=str(HANDLERS), workspace_bytes=finalize_ws)
    def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    return (T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "seq_lens"},
                               name="attention")
            .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"), range_axis="kv")
            .reduce(combine()).finalize(finalize(Output="O")))


def test_declaration_reaches_the_program_and_its_ir():
    p = attention(split_ws=8192, finalize_ws=20000)
    dump = p.dump()
    assert "operator split_kv kind=iter" in dump and "workspace=8192" in dump
    assert "workspace=20000" in dump
    text = p.to_mlir()
    assert "df.workspace_bytes = 8192 : i64" in text
    assert "df.workspace_bytes = 20000 : i64" in text
    assert "workspace=" not in attention().dump()


@pytest.mark.parametrize("value, message", [
    (-1, "handler 'split_kv': df.workspace_bytes -1 must be 0 to 232448"),
    (232449, "handler 'split_kv': df.workspace_bytes 232449 must be 0 to 232448"),
])
def test_bad_values_raise_dfs_message(value, message):
    with pytest.raises(df.DataflowProgramError, match=message):
        attention(split_ws=value).dump()


def test_non_integers_are_refused():
    with pytest.raises(TypeError, match="workspace_bytes must be an int, got '192K'"):
        attention(split_ws="192K")
    with pytest.raises(TypeError, match="workspace_bytes must be an int, got True"):
        attention(split_ws=True)


@pytest.mark.needs_compiler
@pytest.mark.skipif(toolchain.find_clang() is None, reason="clang-22 not found")
def test_kernel_carries_the_largest_workspace():
    art = df.compile(attention(split_ws=8192, finalize_ws=20000), "sm_90a",
                     range_lengths={"kv": [384, 200]},
                     topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128,
                     task_extents=(2,))
    assert ".visible .global .align 4 .u32 df_handler_workspace_bytes = 20000;" in art.ptx
    assert "%dynamic_smem_size" in art.ptx


# The seed handlers with a partial that fills and reads back all of its
# workspace (NaN output without one); shared with the lit test.
WS_HANDLERS = REPO / "test" / "lit" / "Target" / "Inputs" / "workspace_handlers.c"
SEED = dict(topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128,
            task_extents=(2,))
LENGTHS = {"kv": [384, 200]}


def ws_attention(split_ws):
    @T.dataflow.iter(range=("kv_begin", "kv_end"), source=str(WS_HANDLERS),
                     workspace_bytes=split_ws)
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    @T.dataflow.reduce()
    def combine(items: list[AttnInter]) -> AttnInter: ...

    @T.dataflow.finalize()
    def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    return (T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "seq_lens"},
                               name="attention")
            .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"), range_axis="kv")
            .reduce(combine()).finalize(finalize(Output="O")))


@pytest.mark.needs_compiler
@pytest.mark.skipif(toolchain.find_clang() is None, reason="clang-22 not found")
def test_host_backend_gives_every_cta_the_workspace():
    data = AttentionData()
    art = df.compile(ws_attention(8192), "host", range_lengths=LENGTHS, **SEED)
    assert art.workspace_bytes == 8192
    for threads in (1, 4):
        data.O[:] = array.array("f", [0.0] * len(data.O))
        art.launch(data.Q, data.K, data.V, data.O, backend="host", threads=threads)
        assert data.max_error([384, 200]) < 1e-3
    # the same handlers without the declaration see no workspace: NaN output
    bare = df.compile(ws_attention(None), "host", range_lengths=LENGTHS, **SEED)
    assert bare.workspace_bytes == 0
    data.O[:] = array.array("f", [0.0] * len(data.O))
    bare.launch(data.Q, data.K, data.V, data.O, backend="host")
    assert not data.max_error([384, 200]) < 1e-3


def test_merged_mlir_bodies_keep_the_declaration():
    from test_mlir_bodies import COMBINE, FINALIZE, SPLIT_KV, device_runtime
    if not device_runtime():
        pytest.skip("libdf_compiler.so built without the device runtime")
    from dataflow import compiler as df_compiler

    @T.dataflow.iter(range=("kv_begin", "kv_end"), mlir=SPLIT_KV, workspace_bytes=4096)
    def split_kv(seq: T.int32, head: T.int32, Q, K, V) -> AttnInter: ...

    @T.dataflow.reduce(mlir=COMBINE)
    def combine(items: list[AttnInter]) -> AttnInter: ...

    @T.dataflow.finalize(mlir=FINALIZE)
    def finalize(inter: AttnInter, seq: T.int32, head: T.int32, Output) -> None: ...

    p = (T.dataflow_program(task_domain=("batch", "head"), dynamic_ranges={"kv": "seq_lens"},
                            name="attention")
         .partial(split_kv(Q="Q", K="K", V="V"), task_args=("seq", "head"), range_axis="kv")
         .reduce(combine()).finalize(finalize(Output="O")))
    art = df.compile(p, "host", range_lengths=LENGTHS, **SEED)
    text = art.handler_module.text()
    assert "df.workspace_bytes = 4096 : i64" in text
    assert "workspace=4096" in df_compiler.program_dump_from_mlir(text)
    assert art.workspace_bytes == 4096
