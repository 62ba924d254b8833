#!/usr/bin/env python3
"""The Python bindings' CUDA path on a GPU machine (no compiler there).

On the CPU machine: ``python3 scripts/gpu/python_check.py --prepare DIR``
writes DIR/seed.ptx (df.compile of the seed attention program with
examples/seed/attention_handlers.c), DIR/handlers_host.so and copies
libdf.so and libdfrt.so (DF_LIB_DIR / DF_RT_LIB_DIR, default build/).
On the GPU machine: ``DF_LIB_DIR=DIR DF_RT_LIB_DIR=DIR python3
scripts/gpu/python_check.py DIR [OUT]`` launches it with host buffers,
PyTorch CUDA tensors, DLPack, CuPy's __cuda_array_interface__ and NumPy,
re-plans for new lengths, runs the host backend next to it, and draws
the plan timeline (SVG; PNG with matplotlib). Exit status 1 on a wrong
number."""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python-bindings"), str(ROOT / "python-bindings" / "tests")]

import dataflow as df  # noqa: E402
from attention_data import HANDLERS, AttentionData  # noqa: E402
from test_dataflow_runtime import make_program  # noqa: E402

SEED = dict(topology=df.GPUTopology(sm_count=4, cluster_size=2), block_size=128,
            task_extents=(2,))
LENGTHS = {"kv": [384, 256]}
FAILED = []


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    art = df.compile(make_program().named("attention"), "sm_90a", handlers=[HANDLERS],
                     range_lengths=LENGTHS, **SEED)
    (folder / "seed.ptx").write_text(art.ptx)
    shutil.copy(art.host_library, folder / "handlers_host.so")
    lib = Path(os.environ.get("DF_LIB_DIR", ROOT / "build" / "lib" / "Shared"))
    rt = Path(os.environ.get("DF_RT_LIB_DIR", lib.parent))
    shutil.copy(lib / "libdf.so", folder)
    shutil.copy(rt / "libdfrt.so", folder)
    print(f"prepared {folder}: {sorted(p.name for p in folder.iterdir())}")


def check(what: str, error: float, tol: float = 2e-3) -> None:
    ok = error < tol and not math.isnan(error)
    print(f"{'ok  ' if ok else 'FAIL'} {what}: max abs err {error:.2e}")
    if not ok:
        FAILED.append(what)


def torch_reference(torch, q, k, v, lengths):
    out = []
    for t, n in enumerate(lengths):
        s = (k[t, :n].double() @ q[t].double()) * 0.25
        w = torch.softmax(s, 0)
        out.append(w @ v[t, :n].double())
    return torch.stack(out).float()


def run(folder: Path, out: Path) -> int:
    program = make_program().named("attention")
    art = df.compile(program, "sm_90a", handlers=[folder / "handlers_host.so"],
                     ptx=folder / "seed.ptx", range_lengths=LENGTHS, **SEED)
    print("cuda available:", df.cuda_available())
    data = AttentionData()
    r = art.launch(data.Q, data.K, data.V, data.O)
    print(f"launch: backend={r.backend} device={r.device}")
    check("host buffers staged through the GPU", data.max_error([384, 256]))
    r = art.launch(data.Q, data.K, data.V, data.O, range_lengths={"kv": [300, 200]})
    check(f"re-planned to 300,200 (replanned={r.replanned})", data.max_error([300, 200]))
    r = art.launch(data.Q, data.K, data.V, data.O, backend="host", threads=4)
    check("host backend, 4 threads", data.max_error([300, 200]))
    art.launch(data.Q, data.K, data.V, data.O, range_lengths=LENGTHS)
    check("back to 384,256", data.max_error([384, 256]))

    import torch

    g = torch.Generator().manual_seed(7)
    q = torch.rand(2, 16, generator=g).half().cuda() * 2 - 1
    k = torch.rand(2, 4096, 16, generator=g).half().cuda() * 2 - 1
    v = torch.rand(2, 4096, 16, generator=g).half().cuda() * 2 - 1
    o = torch.zeros(2, 16, device="cuda")
    art.launch(q, k, v, o)
    ref = torch_reference(torch, q, k, v, [384, 256])
    check("PyTorch CUDA tensors", (o - ref).abs().max().item())
    for lengths in ([4096, 4096], [500, 700], [1000, 64], [100, 1]):
        o.zero_()
        try:
            art.launch(q, k, v, o, range_lengths={"kv": lengths})
        except df.DataflowCompileError as err:
            # one partial per task: a reduce variant the compiled kernel lacks,
            # and no compiler on this machine to build it
            expected = min(lengths) <= SEED["block_size"] and "lacks" in str(err)
            print(f"{'ok  ' if expected else 'FAIL'} PyTorch, re-planned to {lengths}: {err}")
            if not expected:
                FAILED.append(f"re-plan {lengths}")
            continue
        ref = torch_reference(torch, q, k, v, lengths)
        check(f"PyTorch, re-planned to {lengths}", (o - ref).abs().max().item())

    class DLPackOnly:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    o.zero_()
    art.launch(DLPackOnly(q), DLPackOnly(k), DLPackOnly(v), DLPackOnly(o), range_lengths=LENGTHS)
    ref = torch_reference(torch, q, k, v, [384, 256])
    check("DLPack (CUDA)", (o - ref).abs().max().item())
    try:
        import cupy

        oc = cupy.zeros((2, 16), dtype=cupy.float32)
        art.launch(q, k, v, oc)
        check("CuPy __cuda_array_interface__ output",
              (torch.as_tensor(cupy.asnumpy(oc)) - ref.cpu()).abs().max().item())
    except ImportError:
        print("skip CuPy: not installed")
    import numpy as np

    qn, kn, vn = (x.cpu().numpy() for x in (q, k, v))
    on = np.zeros((2, 16), dtype=np.float32)
    art.launch(qn, kn, vn, on)
    check("NumPy arrays staged through the GPU", float(np.abs(on - ref.cpu().numpy()).max()))
    on[:] = 0
    art.launch(qn, kn, vn, on, backend="host")
    check("NumPy arrays on the host backend", float(np.abs(on - ref.cpu().numpy()).max()))
    out.mkdir(parents=True, exist_ok=True)
    art.plan.plot(out / "seed_timeline.svg")
    try:
        art.plan.plot(out / "seed_timeline.png")
        print("plotted", out / "seed_timeline.png")
    except ImportError as err:
        print("skip PNG:", err)
    art.close()
    print("FAILED: " + ", ".join(FAILED) if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--prepare"]:
        prepare(Path(sys.argv[2]))
        sys.exit(0)
    sys.exit(run(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else ".")))
