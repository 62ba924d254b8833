"""bench/moe's ctypes shim on libdfrt's fake driver: the calls the GPU
bench makes, and each refusal. usage: moe_shim_check.py SHIM FAKE_DRIVER
CARRY [launch-fail] (a carry of bench/moe/make_moe_carry.sh with variant c4,
t128; launch-fail: only the timed launches' errors, for a run under
FAKE_CUDA_LAUNCH_FAIL)."""
import importlib.util
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
root = Path(__file__).resolve().parents[4]
spec = importlib.util.spec_from_file_location("moe_bench", root / "bench/moe/moe_bench.py")
mb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mb)
shim, fake, carry = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
v = carry / "c4"
T, ntasks = 128, int((v / "t128/ntasks").read_text())
ptr = lambda i: 0x10000000 * (i + 1)  # noqa: E731 (the fake driver dereferences nothing)
tensors = [(ptr(0), "bfloat16", (T, mb.H)), (ptr(1), "bfloat16", (mb.E, 2, mb.I, mb.H)),
           (ptr(2), "int32", (ntasks, 4)), (ptr(3), "int32", (2 * T,)),
           (ptr(4), "float32", (T, mb.H)), (ptr(5), "int32", (8,)),
           (ptr(6), "bfloat16", (mb.E, mb.H, mb.I)), (ptr(7), "float32", (2 * T,))]


def expect_error(what, fn):
    try:
        fn()
    except RuntimeError as ex:
        print(f"{what}: {ex}")
        return
    print(f"{what}: no error")


df = mb.DfMoe(shim, v / "moe.ptx", v / "t128/plan.dfplan", 256, driver=fake)
df.bind(tensors)
if sys.argv[4:] == ["launch-fail"]:  # the fake driver fails every launch
    expect_error("spun launch", lambda: df.time(0, 1, False, spin=1000))
    expect_error("plain launch", lambda: df.time(0, 1, False))
    df.close()
    sys.exit(0)
print("describe:", df.describe())
expect_error("set 1", lambda: df.run(1, 1000))
expect_error("set 1 unzeroed", lambda: df.run(1, 1000, zero=False))
df.run(0, 0, zero=False)
print("zeroing:", (v / "output_zeroing").read_text().strip())
# timed launches, each queued behind the shim's clock spin and without it
print("timed:", len(df.time(1, 3, False, spin=1000)), len(df.time(0, 2, False)))
expect_error("untraced", lambda: df.trace(0, 16))
print("hung:", df.hung())
expect_error("bad dtype", lambda: df.bind(tensors[:4] + [(ptr(4), "float99", (T, mb.H))] +
                                         tensors[5:]))
expect_error("seven tensors", lambda: df.bind(tensors[:7]))
for i in range(7):
    df.bind(tensors)
expect_error("ninth set", lambda: df.bind(tensors))
df.close()
expect_error("missing plan", lambda: mb.DfMoe(shim, v / "moe.ptx", v / "none.dfplan", 256,
                                               driver=fake))
expect_error("missing driver", lambda: mb.DfMoe(shim, v / "moe.ptx", v / "t128/plan.dfplan",
                                                 256, driver="/nonexistent/libcuda.so"))
