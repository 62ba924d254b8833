#!/usr/bin/env python3
"""GQA decode attention on the GPU: df (libdfrt through the Python bindings'
ctypes mirrors) against PyTorch SDPA, measured in one process and one run.

usage: bench.py CARRY_DIR [OUT_DIR]
  CARRY_DIR from bench/attention/make_carry.sh (cases.json, NAME.ptx,
  NAME.dfplan for each case and each of its alternative plans, which run
  on the case's inputs and share its baselines); libdfrt.so from $DF_RT_LIB_DIR (bench/attention/run.sh
  builds it). Prints one table; writes results.json and the table to OUT_DIR.

Per case: random fp16 Q [B][32][128], K/V [B][LMAX][8][128] (torch.randn,
fixed seed), R input sets rotated between timed runs so that nothing is
served from the 60 MB L2. Every timed run is preceded by a ~40 us spin
kernel, so the events bracket device time only (no host launch cost on
either side). Median of ITERS runs after WARMUP; a case's df plans are
timed in BENCH_ROUNDS rounds (default 4) that take them in turn, so that
they are compared on the same stretch of the GPU's time.
  df      one executable per input set (same module and plan), 256 threads
  sdpa    torch SDPA, enable_gqa=True, cuDNN and flash backends:
          uniform: one dense call; ragged: one call per sequence, all
          captured in one CUDA graph; padded: the dense batch over LMAX
          keys with a key-padding mask (backends that take a mask)
  floor   K+V bytes / device-to-device copy bandwidth (read + write) of
          this run
Correctness: max |O - ref| against an fp32 reference on the same inputs,
two launches on poisoned (NaN) outputs compared bitwise, and after the
timed runs a reused executable on new inputs against a fresh one's output
(check_reuse: the flags each launch leaves must not let the next one skip
a wait)."""
import ctypes
import json
import os
import statistics
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ROOT = Path(__file__).resolve().parents[2]
# The bindings' libdfrt layer only: a bare package object, so that the
# package's __init__ (which needs libdf.so, not built on the GPU machine)
# does not run.
_pkg = types.ModuleType("dataflow")
_pkg.__path__ = [str(ROOT / "python-bindings" / "dataflow")]
sys.modules["dataflow"] = _pkg
from dataflow._ctypes_rt import (df_rt_executable_options, df_rt_module_options,  # noqa: E402
                                 df_rt_tensor)
from dataflow._cuda_backend import runtime_context  # noqa: E402
from dataflow._lib import check, error_for, runtime  # noqa: E402

HQ, HKV, D = 32, 8, 128
ITERS = int(os.environ.get("BENCH_ITERS", "40"))
# df plans of a case are timed in rounds that alternate between them
# (time_plans); ITERS runs per plan over all rounds
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "4")))
WARMUP = int(os.environ.get("BENCH_WARMUP", "5"))
THREADS = int(os.environ.get("BENCH_THREADS", "256"))
# ~200 us at 1.98 GHz: longer than the host's enqueue of any timed call,
# so the start event waits on the GPU, not on the host. Run O: with ~40 us
# the first case's SDPA calls (Python dispatch, cuDNN graph cache) took
# longer to enqueue on some machines and u8x4k's baselines measured
# 96.8-126 us against 40.6-48 us.
SPIN_CYCLES = 400_000


class DfKernel:
    """One PTX module + plan blob; one executable per bound input set."""

    def __init__(self, ptx: Path, plan: Path, block_size: int, threads: int = THREADS):
        self.rt = runtime_context()
        self.dll = dll = runtime.load()
        dll.df_rt_tensor_raw.restype = df_rt_tensor
        dll.df_rt_tensor_raw.argtypes = [ctypes.c_uint64]
        out = ctypes.c_void_p()
        check(dll.df_rt_device_open(self.rt, torch.cuda.current_device(), ctypes.byref(out)))
        self.dev = out.value
        image = ptx.read_bytes()
        log = ctypes.create_string_buffer(16384)
        mo = df_rt_module_options(None, ctypes.cast(log, ctypes.c_void_p), len(log))
        st = dll.df_rt_module_load(self.dev, image, len(image), ctypes.byref(mo), ctypes.byref(out))
        if st.code != 0:
            raise RuntimeError(f"{error_for(st)}\n{log.value.decode()}")
        self.module = out.value
        blob = plan.read_bytes()
        check(dll.df_rt_plan_from_blob(self.rt, blob, len(blob), ctypes.byref(out)))
        self.plan = out.value
        self.block_size = block_size
        self.threads = threads
        self.exes = []

    def bind(self, tensors) -> int:
        """A new executable bound to these torch tensors; returns its index."""
        dll = self.dll
        eo = df_rt_executable_options()
        eo.block_dim[0], eo.block_dim[1], eo.block_dim[2] = self.threads, 1, 1
        eo.block_size = self.block_size
        out = ctypes.c_void_p()
        check(dll.df_rt_executable_create(self.module, self.plan, ctypes.byref(eo), ctypes.byref(out)))
        descs = (df_rt_tensor * len(tensors))()
        for i, t in enumerate(tensors):
            descs[i] = dll.df_rt_tensor_raw(t.data_ptr())
        check(dll.df_rt_executable_bind_tensors(out.value, None, descs, len(tensors)))
        self.exes.append(out.value)
        return len(self.exes) - 1

    def launch(self, i: int) -> None:
        check(self.dll.df_rt_executable_launch(self.exes[i], None))

    def close(self) -> None:
        for e in self.exes:
            self.dll.df_rt_executable_destroy(e)
        self.dll.df_rt_plan_destroy(self.plan)
        self.dll.df_rt_module_unload(self.module)
        self.dll.df_rt_device_close(self.dev)


def timed(fns, iters=ITERS, warmup=WARMUP):
    """Median device time (us) of fns[i % len(fns)]() over iters runs."""
    return statistics.median(timed_samples(fns, iters, warmup))


def timed_samples(fns, iters, warmup=WARMUP):
    """Device times (us) of fns[i % len(fns)]() over iters runs, after warmup."""
    for i in range(warmup):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
           for _ in range(iters)]
    for i, (a, b) in enumerate(evs):
        torch.cuda._sleep(SPIN_CYCLES)
        a.record()
        fns[i % len(fns)]()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1000.0 for a, b in evs]


def copy_bandwidth():
    n = 4 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    us = timed([lambda: dst.copy_(src)], iters=20, warmup=3)
    del src, dst
    return 2 * n / (us * 1e-6), us


def reference(q, k, v, lens):
    """fp32 attention per sequence: [B][32][128]."""
    out = torch.empty(len(lens), HQ, D, dtype=torch.float32, device="cuda")
    for b, n in enumerate(lens):
        qg = q[b].float().view(HKV, HQ // HKV, D)
        kb = k[b, :n].float().permute(1, 2, 0)  # [8][128][n]
        vb = v[b, :n].float().permute(1, 0, 2)  # [8][n][128]
        p = torch.softmax(torch.bmm(qg, kb) * D ** -0.5, dim=-1)
        out[b] = torch.bmm(p, vb).reshape(HQ, D)
    return out


BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def try_sdpa(name, make_fns, check_out):
    """Time one SDPA variant; returns (us, err) or (None, reason)."""
    try:
        fns = make_fns()
        out = fns[0]()
        torch.cuda.synchronize()
        err = check_out(out)
        return timed(fns), err
    except Exception as e:  # a backend that refuses the shapes
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"


def sdpa_dense(backend, q, k, v, n):
    """Uniform batch: one SDPA call over the first n keys (BSHD storage viewed as BHSD)."""
    def f():
        with sdpa_kernel([BACKENDS[backend]]):
            return F.scaled_dot_product_attention(
                q.view(-1, HQ, 1, D), k[:, :n].transpose(1, 2), v[:, :n].transpose(1, 2),
                enable_gqa=True)
    return f


def sdpa_padded(backend, q, k, v, mask):
    def f():
        with sdpa_kernel([BACKENDS[backend]]):
            return F.scaled_dot_product_attention(
                q.view(-1, HQ, 1, D), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                enable_gqa=True)
    return f


def sdpa_graph(backend, q, k, v, lens):
    """One SDPA call per sequence, captured in one CUDA graph."""
    def calls():
        outs = []
        with sdpa_kernel([BACKENDS[backend]]):
            for b, n in enumerate(lens):
                outs.append(F.scaled_dot_product_attention(
                    q[b:b + 1].view(1, HQ, 1, D), k[b:b + 1, :n].transpose(1, 2),
                    v[b:b + 1, :n].transpose(1, 2), enable_gqa=True))
        return outs
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        calls()  # warm-up outside the capture (cuDNN plans, workspaces)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = calls()

    def f():
        g.replay()
        return outs
    return f


def make_inputs(c, g):
    """One input set of case c (Q, K, V random from generator g; O empty)."""
    B, lmax = len(c["lens"]), c["lmax"]
    q = torch.randn(B, HQ, D, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(B, lmax, HKV, D, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(B, lmax, HKV, D, device="cuda", dtype=torch.float16, generator=g)
    o = torch.empty(B, HQ, D, device="cuda", dtype=torch.float32)
    return q, k, v, o


def plan_index(carry: Path):
    """{plan name: (its case, its block, its threads per CTA)} over the
    carry's cases and their alternative plans (an alternative runs on its
    case's inputs)."""
    plans = {}
    for c in json.loads((carry / "cases.json").read_text()):
        plans[c["name"]] = (c, c["block"], c.get("threads", THREADS))
        for a in c.get("alts", []):
            plans[a["name"]] = (c, a["block"], a.get("threads", THREADS))
    return plans


def run_case(c, carry: Path, copy_bw):
    name, lens, lmax = c["name"], c["lens"], c["lmax"]
    B = len(lens)
    set_bytes = B * lmax * HKV * D * 2 * 2
    R = 3 if set_bytes * 3 < (40 << 30) else 2
    g = torch.Generator(device="cuda").manual_seed(1234)
    sets = [make_inputs(c, g) for _ in range(R)]
    ref = reference(*sets[0][:3], lens)
    res = {"name": name, "what": c["what"], "B": B, "tokens": c["tokens"], "lmax": lmax,
           "block": c["block"], "schedule": c.get("schedule", "rr"), "kv_bytes": c["kv_bytes"],
           "lens": lens}
    res["floor_us"] = c["kv_bytes"] / copy_bw * 1e6
    # The case's plan, then its alternative plans (other schedules of the
    # same lengths), each on the same input sets.
    # Alternatives missing from the carry (make_carry.sh CARRY_PLANS) are
    # left out.
    plans = [res] + [dict(res, name=a["name"], block=a["block"], schedule=a["schedule"],
                          threads=a.get("threads", THREADS), join=a.get("join"))
                     for a in c.get("alts", []) if (carry / f"{a['name']}.ptx").exists()]
    loaded = []
    try:
        for r in plans:
            try:
                dfk, fns = check_df(r, carry, sets, ref)
            except Exception as e:  # a plan the device refuses (e.g. cluster residency): reported
                r["df_error"] = str(e).splitlines()[-1]
                continue
            loaded.append((r, fns, dfk))
        time_plans([(r, fns) for r, fns, _ in loaded])
        base = baselines(c, sets, ref)
        check_reuse(loaded, sets)
    finally:
        torch.cuda.synchronize()
        for _, _, dfk in loaded:
            dfk.close()

    res["baselines"] = {k: {"us": v[0], "err": v[1]} if v[0] is not None else {"error": v[1]}
                        for k, v in base.items()}
    ok = {k: v[0] for k, v in base.items() if v[0] is not None}
    if ok:
        best = min(ok, key=ok.get)
        res["best"], res["best_us"] = best, ok[best]
    for r in plans[1:]:
        for k in ("baselines", "best", "best_us"):
            if k in res:
                r[k] = res[k]
    del sets, ref
    torch.cuda.empty_cache()
    return plans


def baselines(c, sets, ref):
    """{name: (us, max err) or (None, reason)} of the PyTorch baselines of
    case c on its input sets."""
    lens, lmax = c["lens"], c["lmax"]
    B = len(lens)
    uniform = len(set(lens)) == 1

    def err_of(out):
        if isinstance(out, list):
            out = torch.cat([x.reshape(1, HQ, D) for x in out])
        return (out.float().reshape(B, HQ, D) - ref).abs().max().item()

    base = {}
    for be in ("cudnn", "flash"):
        if uniform:
            base[f"{be} dense"] = try_sdpa(be, lambda be=be: [sdpa_dense(be, s[0], s[1], s[2], lens[0])
                                                              for s in sets], err_of)
        else:
            base[f"{be} graph"] = try_sdpa(be, lambda be=be: [sdpa_graph(be, s[0], s[1], s[2], lens)
                                                              for s in sets], err_of)
    if not uniform:
        pos = torch.arange(lmax, device="cuda")
        mask = (pos[None, :] < torch.tensor(lens, device="cuda")[:, None]).view(B, 1, 1, lmax)
        for be in ("cudnn", "efficient"):
            base[f"{be} padded"] = try_sdpa(be, lambda be=be: [sdpa_padded(be, s[0], s[1], s[2], mask)
                                                               for s in sets], err_of)
    return base


JOIN_HEADER = 16    # gqa_join.h: a task's counter (then one flag per slot)
JOIN_SLOT = 4 * 4 + 4 * 128 * 2  # sizeof(gqa_inter): lse[4] f32, o[4][128] f16


def join_stride(slots):
    """Bytes of one task's region of the Join tensor (gqa_join.h
    join_stride): the counter, the slots' flags padded to 16 bytes, the
    slots."""
    return JOIN_HEADER + (4 * slots + 15) // 16 * 16 + slots * JOIN_SLOT


def join_tensors(res):
    """SeqLens (int32 [B]) and a zeroed Join tensor (per task a counter,
    res['join'] flags and res['join'] slots) of a handler-join plan.
    Launches share them: each leaves the counters and flags zero for the
    next."""
    lens = res["lens"]
    stride = join_stride(res["join"])
    return [torch.tensor(lens, dtype=torch.int32, device="cuda"),
            torch.zeros(len(lens) * HKV * stride, dtype=torch.uint8, device="cuda")]


def check_df(res, carry: Path, sets, ref):
    """Loads the plan res['name'], binds it to every input set and fills
    res with its error and determinism; returns (kernel, launches)."""
    name = res["name"]
    dfk = DfKernel(carry / f"{name}.ptx", carry / f"{name}.dfplan", res["block"],
                   res.get("threads", THREADS))
    try:
        # a handler-join plan (cases.py ".join") also reads SeqLens and
        # Join (examples/attention_gqa/gqa_join.h); the kernel keeps them
        # alive, its executables hold only their addresses
        dfk.join_tensors = join_tensors(res) if res.get("join") else []
        idx = [dfk.bind(list(s) + dfk.join_tensors) for s in sets]
        o0 = sets[0][3]
        runs = []
        for _ in range(2):
            o0.fill_(float("nan"))
            dfk.launch(idx[0])
            torch.cuda.synchronize()
            runs.append(o0.clone())
        res["df_err"] = (runs[0] - ref).abs().max().item()
        res["df_nan"] = bool(torch.isnan(runs[0]).any().item())
        res["df_deterministic"] = bool(torch.equal(runs[0], runs[1]))
    except Exception:
        torch.cuda.synchronize()
        dfk.close()
        raise
    return dfk, [lambda i=i: dfk.launch(i) for i in idx]


def check_reuse(loaded, sets):
    """After the timed runs: set 1's inputs copied into set 0's tensors,
    executable 0 (which has run many times) must give executable 1's
    output on set 1 bitwise. A launch whose flags still held the last
    run's epochs would not wait for its producers and would read that
    run's intermediates, made from the old inputs (df_reuse_ok). Clobbers
    set 0: run after everything else that uses it."""
    if len(sets) < 2:
        return
    outs = {}
    for r, fns, _ in loaded:
        if "df_error" in r:
            continue
        sets[1][3].fill_(float("nan"))
        fns[1]()
        torch.cuda.synchronize()
        outs[id(r)] = sets[1][3].clone()
    for a, b in zip(sets[0][:3], sets[1][:3]):
        a.copy_(b)
    for r, fns, _ in loaded:
        if id(r) not in outs:
            continue
        sets[0][3].fill_(float("nan"))
        fns[0]()
        torch.cuda.synchronize()
        r["df_reuse_ok"] = bool(torch.equal(sets[0][3], outs[id(r)]))


def time_plans(loaded):
    """df_us of every loaded plan [(res, launches)], timed in ROUNDS rounds
    that visit the plans in turn (reversed every other round), ITERS runs
    per plan in all: a slow phase of the GPU (clocks, a process's memory
    placement) falls on every plan alike instead of on the first ones a
    case measures (run AA: the same s32 plan 85.4 µs first in its case,
    77.6 later in the same process). df_us is the median of all runs,
    df_round_us each round's median."""
    per = max(1, -(-ITERS // ROUNDS))
    samples = {id(r): [] for r, _ in loaded}
    rounds = {id(r): [] for r, _ in loaded}
    for k in range(ROUNDS):
        for r, fns in (loaded if k % 2 == 0 else loaded[::-1]):
            if "df_error" in r:
                continue
            try:
                s = timed_samples(fns, per)
            except Exception as e:  # a launch that fails: reported, the others go on
                r["df_error"] = str(e).splitlines()[-1]
                continue
            samples[id(r)] += s
            rounds[id(r)].append(statistics.median(s))
    for r, _ in loaded:
        if "df_error" not in r:
            r["df_us"] = statistics.median(samples[id(r)])
            r["df_round_us"] = rounds[id(r)]


def det_column(r):
    """yes: two launches bitwise equal and, after the timed runs, a reused
    executable on new inputs equal to a fresh one's output (check_reuse)."""
    if not r["df_deterministic"]:
        return "NO"
    if r.get("df_reuse_ok") is False:
        return "NO (reuse)"
    return "yes"


def table(results, copy_bw, copy_us):
    lines = [f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"copy bandwidth {copy_bw / 1e12:.2f} TB/s (read+write, 4 GiB in {copy_us:.0f} us)",
             "",
             "| case | B | tokens | KV MB | schedule | block | floor us | df us | df TB/s | % copy | "
             "best PyTorch | us | best/df | df max err | det. |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "df_error" in r:
            lines.append(f"| {r['name']} | {r['B']} | {r['tokens']} | {r['kv_bytes'] / 1e6:.0f} | "
                         f"{r.get('schedule', 'rr')} | {r['block']} | {r['floor_us']:.1f} | "
                         f"not run: {r['df_error']} |||||||")
            continue
        tb = r["kv_bytes"] / (r["df_us"] * 1e-6) / 1e12
        ratio = f"{r['best_us'] / r['df_us']:.2f}x" if "best_us" in r else "-"
        lines.append(
            f"| {r['name']} | {r['B']} | {r['tokens']} | {r['kv_bytes'] / 1e6:.0f} | {r.get('schedule', 'rr')} | "
            f"{r['block']} | "
            f"{r['floor_us']:.1f} | {r['df_us']:.1f} | {tb:.2f} | {100 * tb * 1e12 / copy_bw:.0f} % | "
            f"{r.get('best', '-')} | {r.get('best_us', float('nan')):.1f} | {ratio} | "
            f"{r['df_err']:.1e}{' NaN!' if r['df_nan'] else ''} | "
            f"{det_column(r)} |")
    lines += ["", "baselines (us, max err vs fp32 reference):"]
    for r in results:
        parts = []
        for k, v in r["baselines"].items():
            parts.append(f"{k} {v['us']:.1f} ({v['err']:.1e})" if "us" in v else f"{k}: {v['error']}")
        lines.append(f"  {r['name']}: " + "; ".join(parts))
    return "\n".join(lines)


def main():
    carry = Path(sys.argv[1]).resolve()
    out = Path(sys.argv[2] if len(sys.argv) > 2 else ".")
    out.mkdir(parents=True, exist_ok=True)
    cases = json.loads((carry / "cases.json").read_text())
    only = os.environ.get("BENCH_CASES")
    if only:
        cases = [c for c in cases if c["name"] in only.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_bw, copy_us = copy_bandwidth()
    results = []
    for c in cases:
        for r in run_case(c, carry, copy_bw):
            results.append(r)
            if "df_error" in r:
                print(f"{r['name']}: not run: {r['df_error']}", flush=True)
                continue
            spread = (f" (rounds {min(r['df_round_us']):.1f}-{max(r['df_round_us']):.1f})"
                      if r.get("df_round_us") else "")
            print(f"{r['name']}: df {r['df_us']:.1f} us{spread}, err {r['df_err']:.1e}, "
                  f"det {det_column(r)}, best {r.get('best')} "
                  f"{r.get('best_us', float('nan')):.1f} us", flush=True)
    (out / "results.json").write_text(json.dumps({"copy_bw": copy_bw, "cases": results}, indent=1))
    t = table(results, copy_bw, copy_us)
    (out / "table.md").write_text(t + "\n")
    print(t)


if __name__ == "__main__":
    main()
