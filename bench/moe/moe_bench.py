#!/usr/bin/env python3
"""Fused MoE on the H200: df against torch._grouped_mm, in one process.

On the GPU machine (PyTorch with CUDA, gcc, cmake; no LLVM), from the
repository root, with the folder bench/moe/make_moe_carry.sh made on the
CPU machine:

    python3 bench/moe/moe_bench.py build-moe-carry [--out DIR]

The carry holds one folder per variant (SMs x cluster size, e.g. c4 = 128
SMs in clusters of 4), each with its kernel and one plan per token count;
the routing (fixed-seed Zipf) is the same in every variant. Each variant
runs with every --block-dims entry (threads per CTA; rows "c4/256").

It builds libdfrt (cmake, like scripts/gpu/run_seed.sh) and the ctypes shim
bench/moe/moe_df_shim.c with gcc, generates the weights and activations on
the GPU from fixed seeds (32 experts, hidden 2048, intermediate 768, bf16;
weights uniform in [-1, 1) / sqrt(fan-in), activations uniform in [-1, 1)),
and for every token count of the carry measures

  * df (every variant): the carried plan and kernel through libdfrt, CUDA events around
    each launch (queued behind a --spin-cycles clock spin, so the events
    time the GPU's work and not the host's submission, as bench/attention
    does; the grouped_mm graphs and the copy the same way), median of
    --iters after --warmup, rotating over --sets
    input sets (own X, weights and output per set); once with the output
    zeroing in the timed region ("df"), once without ("df kernel"); a
    variant whose kernel zeroes the output itself (VARIANT/output_zeroing
    says "kernel", examples/moe/moe_zero_output.h) is timed once, launch
    only, and its checked launches start from NaNs;
  * grouped_mm: index_select -> torch._grouped_mm (gate|up) -> SiLU * up ->
    torch._grouped_mm (down) -> weighted index_add_ into fp32, captured in
    one CUDA graph per set, replayed the same way;
  * floor: bytes of all expert weights / device-to-device copy bandwidth
    (2 x bytes / time of a 1 GiB copy, measured in this run);
  * max abs error of both against an fp32 reference (per-expert matmuls of
    the same bf16 values), and whether two df launches give bitwise equal
    outputs.

Prints one table (also written to OUT/moe_table.txt; OUT defaults to $OUT
or ./moe-out). Exit status 1 when a df result is wrong or not deterministic.
"""

from __future__ import annotations

import argparse
import array
import ctypes
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
E, H, I = 32, 2048, 768
TOP_K = 2
WEIGHT_BYTES = E * 3 * H * I * 2  # gate, up, down in bf16
SET_SEED = 1000


def build(build_dir: Path, log: Path) -> Path:
    """libdfrt (top-level project without MLIR, else the wrapper project
    run_seed.sh uses) and the shim; returns the shim's path."""
    env = dict(os.environ, CC="gcc")
    flags = "-Wno-maybe-uninitialized"
    with open(log, "w") as out:
        def run(cmd):
            out.write("$ " + " ".join(map(str, cmd)) + "\n")
            out.flush()
            return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
        gen = ["-G", "Ninja"] if subprocess.run(["which", "ninja"], capture_output=True).returncode == 0 else []
        ok = run(["cmake", "-S", ROOT, "-B", build_dir, *gen, "-DDF_ENABLE_MLIR=OFF",
                  "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_C_FLAGS={flags}"]) == 0
        if not ok:
            wrapper = build_dir.parent / (build_dir.name + "-src")
            build_dir = build_dir.parent / (build_dir.name + "-wrapper")
            wrapper.mkdir(parents=True, exist_ok=True)
            (wrapper / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.25)
project(dfrt_gpu C)
set(CMAKE_C_STANDARD 17)
set(CMAKE_C_EXTENSIONS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_compile_options(-Wall -Wextra -Wno-format-truncation)
include_directories({ROOT}/include)
add_subdirectory({ROOT}/lib/Support support)
add_subdirectory({ROOT}/lib/Plan plan)
add_subdirectory({ROOT}/lib/Runtime/cuda cuda)
""")
            if run(["cmake", "-S", wrapper, "-B", build_dir, *gen, "-DCMAKE_BUILD_TYPE=Release",
                    f"-DCMAKE_C_FLAGS={flags}"]) != 0:
                sys.exit(f"moe_bench: cmake failed, see {log}")
        if run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 4), "--target", "dfrt"]) != 0:
            sys.exit(f"moe_bench: building libdfrt failed, see {log}")
        lib = build_dir / "lib"
        shim = build_dir / "libmoe_df_shim.so"
        if run(["gcc", "-std=gnu17", "-O2", "-Wall", "-Wextra", "-fPIC", "-shared",
                f"-I{ROOT}/include", ROOT / "bench/moe/moe_df_shim.c", f"-L{lib}", "-ldfrt",
                f"-Wl,-rpath,{lib}", "-o", shim]) != 0:
            sys.exit(f"moe_bench: building the shim failed, see {log}")
    return shim


class DfMoe:
    """The shim (moe_df_shim.c) through ctypes: one kernel + plan, one
    executable per rotation set."""

    def __init__(self, shim: Path, kernel: Path, plan: Path, block_dim: int = 256,
                 driver: str = "", device: int = 0):
        lib = ctypes.CDLL(str(shim))
        c = ctypes
        lib.moe_df_open.argtypes = [c.c_char_p, c.c_char_p, c.c_char_p, c.c_int, c.c_uint32,
                                    c.POINTER(c.c_void_p), c.c_char_p, c.c_size_t]
        lib.moe_df_bind.argtypes = [c.c_void_p, c.c_uint32, c.POINTER(c.c_uint64),
                                    c.POINTER(c.c_char_p),
                                    c.POINTER(c.c_uint32), c.POINTER(c.c_int64), c.c_int,
                                    c.c_char_p, c.c_size_t]
        lib.moe_df_run.argtypes = [c.c_void_p, c.c_uint32, c.c_uint32, c.c_int, c.c_char_p,
                                   c.c_size_t]
        lib.moe_df_hung.argtypes = [c.c_void_p]
        lib.moe_df_time.argtypes = [c.c_void_p, c.c_uint32, c.c_uint32, c.c_int, c.c_uint64,
                                    c.POINTER(c.c_float), c.c_char_p, c.c_size_t]
        lib.moe_df_describe.argtypes = [c.c_void_p, c.c_uint32, c.c_char_p, c.c_size_t,
                                        c.c_char_p, c.c_size_t]
        lib.moe_df_close.argtypes = [c.c_void_p]
        lib.moe_df_trace.argtypes = [c.c_void_p, c.c_uint32, c.c_void_p, c.c_size_t, c.c_char_p,
                                     c.c_size_t]
        self.lib, self.device = lib, device
        self.err = ctypes.create_string_buffer(4096)
        self.h = ctypes.c_void_p()
        rc = lib.moe_df_open(driver.encode(), str(kernel).encode(), str(plan).encode(), device,
                             block_dim, ctypes.byref(self.h), self.err, len(self.err))
        self._check(rc, "open")

    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise RuntimeError(f"df {what}: {self.err.value.decode(errors='replace')}")

    def bind(self, tensors) -> None:
        """tensors: 8 (data_ptr, dtype name, shape) in the program's order
        (moe_tensors)."""
        n = len(tensors)
        ptrs = (ctypes.c_uint64 * n)(*[t[0] for t in tensors])
        names = (ctypes.c_char_p * n)(*[t[1].encode() for t in tensors])
        ndim = (ctypes.c_uint32 * n)(*[len(t[2]) for t in tensors])
        flat = [d for t in tensors for d in t[2]]
        shapes = (ctypes.c_int64 * len(flat))(*flat)
        self._check(self.lib.moe_df_bind(self.h, n, ptrs, names, ndim, shapes, self.device,
                                         self.err, len(self.err)), "bind")

    def run(self, s: int, timeout_ms: int = 0, zero: bool = True) -> None:
        """Zero set s's output (unless not `zero`: a kernel that zeroes it
        itself) and launch; timeout_ms > 0: under libdfrt's watchdog (a hang
        raises, naming the blocked CTAs)."""
        self._check(self.lib.moe_df_run(self.h, s, timeout_ms, int(zero), self.err,
                                        len(self.err)), "run")

    def hung(self) -> bool:
        return bool(self.h) and self.lib.moe_df_hung(self.h) != 0

    def time(self, warmup: int, iters: int, zero: bool, spin: int = 0) -> list[float]:
        """Event times (us) of `iters` launches; spin > 0: each launch queued
        behind a clock spin of that many cycles (median_events)."""
        ms = (ctypes.c_float * iters)()
        self._check(self.lib.moe_df_time(self.h, warmup, iters, int(zero), spin, ms, self.err,
                                         len(self.err)), "time")
        return [x * 1000.0 for x in ms]  # microseconds

    def trace(self, s: int, words: int):
        """Launch set s once with df_rt_trace_buf zeroed before (a kernel
        linked with the traced runtime); its `words` u64 after."""
        host = array.array("Q", bytes(words * 8))
        buf = (ctypes.c_char * (words * 8)).from_buffer(host)
        self._check(self.lib.moe_df_trace(self.h, s, ctypes.addressof(buf), len(buf), self.err,
                                          len(self.err)), "trace")
        return host

    def describe(self) -> str:
        buf = ctypes.create_string_buffer(512)
        self._check(self.lib.moe_df_describe(self.h, 0, buf, len(buf), self.err, len(self.err)),
                    "describe")
        return buf.value.decode()

    def close(self) -> None:
        if self.h:
            self.lib.moe_df_close(self.h)
            self.h = ctypes.c_void_p()


def moe_tensors(x, wgu, wd, r, out, tokens: int):
    """The program's 8 tensors for DfMoe.bind, in its order: activations,
    gate/up weights, the routing of load_routing, the fp32 output, the
    handlers' Sync words (of load_routing), down weights, routing weights."""
    return [(x.data_ptr(), "bfloat16", (tokens, H)),
            (wgu.data_ptr(), "bfloat16", (E, 2, I, H)),
            (r["tasks"].data_ptr(), "int32", (r["ntasks"], 4)),
            (r["rows"].data_ptr(), "int32", (TOP_K * tokens,)),
            (out.data_ptr(), "float32", (tokens, H)),
            (r["sync"].data_ptr(), "int32", (8,)),
            (wd.data_ptr(), "bfloat16", (E, H, I)),
            (r["rw"].data_ptr(), "float32", (TOP_K * tokens,))]


def load_routing(torch, d: Path, tokens: int):
    def arr(name, dtype, shape):
        data = bytearray((d / name).read_bytes())
        return torch.frombuffer(data, dtype=dtype).reshape(shape).cuda()
    ntasks = int((d / "ntasks").read_text())
    return dict(tasks=arr("tasks.bin", torch.int32, (ntasks, 4)),
                rows=arr("tokens.bin", torch.int32, (TOP_K * tokens,)),
                rw=arr("weights.bin", torch.float32, (TOP_K * tokens,)),
                topk=arr("topk.bin", torch.int32, (tokens, TOP_K)),
                topw=arr("topw.bin", torch.float32, (tokens, TOP_K)),
                sync=arr("sync.bin", torch.int32, (8,)), ntasks=ntasks)


def uniform(torch, shape, seed, scale):
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = torch.empty(shape, device="cuda", dtype=torch.float32)
    t.uniform_(-1.0, 1.0, generator=g)
    return (t * scale).to(torch.bfloat16)


def reference(torch, x, wgu, wd, topk, topw):
    """fp32 per-expert matmuls of the same bf16 values."""
    F = torch.nn.functional
    out = torch.zeros(x.shape[0], H, device="cuda", dtype=torch.float32)
    xf = x.float()
    for e in range(E):
        t, k = (topk == e).nonzero(as_tuple=True)
        if t.numel() == 0:
            continue
        gu = xf[t] @ wgu[e].reshape(2 * I, H).float().T
        h = F.silu(gu[:, :I]) * gu[:, I:]
        y = h @ wd[e].float().T
        out.index_add_(0, t, y * topw[t, k][:, None])
    return out


def pack_weights(wgu, wd):
    """Wgu [E][2][I][H] and Wd [E][H][I] in the handlers' -DMOE_PACKED
    layout (examples/moe/README.md, moe_fused_gen --packed): Wgu
    [E][I/8][H/32][2][32][8], Wd [E][H/16][I/32][2][32][8], lane 4g + t."""
    e, _, i, h = wgu.shape
    pgu = wgu.view(e, 2, i // 8, 8, h // 32, 4, 8).permute(0, 2, 4, 1, 3, 5, 6).contiguous()
    pd = wd.view(e, h // 16, 2, 8, i // 32, 4, 8).permute(0, 1, 4, 2, 3, 5, 6).contiguous()
    return pgu, pd


def median_events(torch, fn, warmup: int, iters: int, sets: int, spin: int = 0) -> list[float]:
    """Event times (us) of fn(i % sets). spin > 0: a clock spin of that many
    cycles runs first, so fn's work is already queued when the start event
    fires and the events time the GPU, not the host's submission."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + iters):
        if spin:
            torch.cuda._sleep(spin)
        start.record()
        fn(i % sets)
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) * 1000.0)
    return times


def set_weights(torch, s: int):
    """Rotation set s's gate/up and down weights (seeded; every tool that
    replays a set makes the same values)."""
    return (uniform(torch, (E, 2, I, H), SET_SEED + 10 * s + 1, H ** -0.5),
            uniform(torch, (E, H, I), SET_SEED + 10 * s + 2, I ** -0.5))


def set_tokens(torch, s: int, tokens: int):
    """Rotation set s's activations at `tokens` tokens."""
    return uniform(torch, (tokens, H), SET_SEED + 10 * s + 3 + tokens, 1.0)


def copy_bandwidth(torch, spin: int, warmup=5, iters=30) -> float:
    """bytes/s of a 1 GiB device-to-device copy, read + write counted."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    us = statistics.median(median_events(torch, lambda _: dst.copy_(src), warmup, iters, 1,
                                         spin))
    del src, dst
    return 2 * n / (us * 1e-6)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("carry", type=Path)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "moe-out")))
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build-gpu-moe")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--sets", type=int, default=3, help="rotation sets of inputs (<= 8)")
    ap.add_argument("--spin-cycles", type=int, default=400_000,
                    help="a one-thread clock spin of this many cycles (~200 us) before each "
                    "timed launch, so the events time the GPU's work and not the host's "
                    "submission (as bench/attention); 0: no spin (the runs before run Y)")
    ap.add_argument("--timeout-ms", type=int, default=20000,
                    help="watchdog of the two checked launches per case (0: off)")
    ap.add_argument("--block-dims", default="256,192",
                    help="threads per CTA to try, comma-separated (the handlers share their "
                    "m-tiles out over the warps; 256 is the most the registers allow)")
    a = ap.parse_args()
    if a.iters < 30:
        sys.exit("moe_bench: --iters must be at least 30")
    a.out.mkdir(parents=True, exist_ok=True)
    shim = build(a.build_dir, a.out / "build.log")

    import torch  # noqa: PLC0415 (after the build: a failed build needs no torch)
    F = torch.nn.functional
    dev = torch.cuda.get_device_properties(0)
    lines = [f"device: {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}, "
             f"CUDA {torch.version.cuda}"]
    bw = copy_bandwidth(torch, a.spin_cycles)
    floor_us = WEIGHT_BYTES / bw * 1e6
    lines.append(f"copy bandwidth (1 GiB D2D, read+write): {bw / 1e12:.2f} TB/s; all expert "
                 f"weights {WEIGHT_BYTES / 1e6:.1f} MB -> floor {floor_us:.1f} us")

    weights = [set_weights(torch, s) for s in range(a.sets)]
    packed_weights = []  # the same values packed, made for the first packed variant

    header = ("tokens", "variant", "tasks", "df us", "df kernel us", "grouped_mm us", "floor us",
              "gmm/df", "df/floor", "df TB/s", "% copy bw", "df max err", "gmm max err",
              "|ref| max", "df bitwise")
    rows = []

    def say(line: str) -> None:
        """Progress as it happens (a hang or a device-tool time limit still
        leaves the lines before it)."""
        lines.append(line)
        print(line, flush=True)

    def finish(rc: int) -> int:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        fmt = lambda row: "| " + " | ".join(str(x).rjust(w) for x, w in zip(row, widths)) + " |"  # noqa: E731
        table = [fmt(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        table += [fmt(row) for row in rows]
        spun = (f"each queued behind a {a.spin_cycles}-cycle spin" if a.spin_cycles
                else "no spin before the start event")
        notes = [f"median of {a.iters} launches after {a.warmup} warm-ups ({spun}), {a.sets} "
                 "rotating input sets; df = zero the fp32 output + launch (a kernel that zeroes it "
                 "itself, examples/moe/moe_zero_output.h: launch only), df kernel = launch "
                 "only; TB/s = "
                 "all expert weight bytes / df time; errors vs fp32 reference; df ok = max err <= "
                 "1e-2 * |ref| max + 1e-3 and bitwise equal launches"]
        text = "\n".join(lines + [""] + table + [""] + notes)
        print("\n" + "\n".join(table + [""] + notes))
        (a.out / "moe_table.txt").write_text(text + "\n")
        return rc

    for line in lines:
        print(line, flush=True)
    variants = sorted(p.parent for p in a.carry.glob("*/moe.ptx"))
    if not variants:
        sys.exit(f"moe_bench: no VARIANT/moe.ptx in {a.carry} (bench/moe/make_moe_carry.sh)")
    counts_t = sorted({int(p.name[1:]) for v in variants for p in v.glob("t*")})
    failed = False
    for T in counts_t:
        first = next(v / f"t{T}" for v in variants if (v / f"t{T}").is_dir())
        r = load_routing(torch, first, T)
        counts = torch.bincount(r["topk"].flatten().long(), minlength=E)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        rows_l = r["rows"].long()
        xs = [set_tokens(torch, s, T) for s in range(a.sets)]
        ref = reference(torch, xs[0], weights[0][0], weights[0][1], r["topk"], r["topw"])
        ref_max = ref.abs().max().item()

        # grouped_mm baseline, one CUDA graph per set (rows grouped by expert
        # in the carried order, the same grouping df's task table uses).
        gouts = [torch.zeros(T, H, device="cuda", dtype=torch.float32) for _ in range(a.sets)]

        def moe_gmm(s):
            wgu, wd = weights[s]
            x = xs[s].index_select(0, rows_l)
            gu = torch._grouped_mm(x, wgu.view(E, 2 * I, H).transpose(1, 2), offs=offs)
            h = F.silu(gu[:, :I]) * gu[:, I:]
            y = torch._grouped_mm(h, wd.transpose(1, 2), offs=offs)
            gouts[s].zero_()
            gouts[s].index_add_(0, rows_l, y.float() * r["rw"][:, None])

        t_gmm, gmm_err = float("nan"), float("nan")
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for s in range(a.sets):
                    moe_gmm(s)
            torch.cuda.current_stream().wait_stream(side)
            graphs = []
            for s in range(a.sets):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    moe_gmm(s)
                graphs.append(g)
            graphs[0].replay()
            torch.cuda.synchronize()
            gmm_err = (gouts[0] - ref).abs().max().item()
            t_gmm = statistics.median(median_events(torch, lambda s: graphs[s].replay(),
                                                    a.warmup, a.iters, a.sets,
                                                    a.spin_cycles))
            del graphs
        except Exception as ex:  # noqa: BLE001 (report the baseline as missing, keep df's rows)
            say(f"grouped_mm baseline failed at {T} tokens: {ex}")

        for v, bd in [(v, int(b)) for v in variants for b in a.block_dims.split(",")]:
            d = v / f"t{T}"
            name = f"{v.name}/{bd}"
            if not d.is_dir():
                continue
            rv = load_routing(torch, d, T)
            zeroing = v / "output_zeroing"
            by_kernel = zeroing.is_file() and zeroing.read_text().strip() == "kernel"
            # A kernel that zeroes Output itself starts from NaNs: a row it
            # leaves alone fails the check.
            outs = [torch.full((T, H), float("nan") if by_kernel else 0.0, device="cuda",
                               dtype=torch.float32) for _ in range(a.sets)]
            torch.cuda.synchronize()  # libdfrt runs on its own stream
            df = None
            try:
                df = DfMoe(shim, v / "moe.ptx", d / "plan.dfplan", bd)
                layout = v / "weights_layout"
                packed = layout.is_file() and layout.read_text().strip() == "packed"
                if packed and not packed_weights:
                    packed_weights.extend(pack_weights(*w) for w in weights)
                    torch.cuda.synchronize()  # packed on torch's stream, read on libdfrt's
                for s in range(a.sets):
                    wgu, wd = (packed_weights if packed else weights)[s]
                    df.bind(moe_tensors(xs[s], wgu, wd, rv, outs[s], T))
                if T == counts_t[0]:
                    say(f"df {name}: {df.describe()}")
                df.run(0, a.timeout_ms, zero=not by_kernel)
                once = outs[0].clone()
                df.run(0, a.timeout_ms, zero=not by_kernel)  # over the first result
                bitwise = torch.equal(once.view(torch.int32), outs[0].view(torch.int32))
                df_err = (once - ref).abs().max().item()
                t_df = statistics.median(df.time(a.warmup, a.iters, not by_kernel,
                                                 a.spin_cycles))
                t_kernel = t_df if by_kernel else statistics.median(
                    df.time(a.warmup, a.iters, False, a.spin_cycles))
            except RuntimeError as ex:
                say(f"df {name} at {T} tokens: {ex}")
                rows.append((T, name, rv["ntasks"], "failed") + ("-",) * (len(header) - 4))
                if df and df.hung():
                    say("the GPU context is unusable after the timeout: stopping")
                    return finish(1)
                continue
            finally:
                if df and not df.hung():
                    df.close()
            ok = bitwise and df_err <= 1e-2 * max(ref_max, 1e-6) + 1e-3
            failed |= not ok
            rate = WEIGHT_BYTES / (t_df * 1e-6)
            rows.append((T, name, rv["ntasks"], f"{t_df:.1f}", f"{t_kernel:.1f}", f"{t_gmm:.1f}",
                         f"{floor_us:.1f}", f"{t_gmm / t_df:.2f}x", f"{t_df / floor_us:.2f}",
                         f"{rate / 1e12:.2f}", f"{100 * rate / bw:.0f}%", f"{df_err:.2e}",
                         f"{gmm_err:.2e}", f"{ref_max:.3f}", "yes" if bitwise else "NO"))
            say("row: " + " ".join(map(str, rows[-1])))
            del outs
        del xs, gouts
        torch.cuda.empty_cache()

    return finish(1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
