#!/usr/bin/env python3
"""Inputs and reference output of examples/seed/attention.mlir with the C
handlers of examples/seed/attention_handlers.c (head dim 16, KV stride
4096, scale 1/4): q.bin, k.bin, v.bin (float16) and o_ref.bin (float32,
softmax attention over each task's first L keys, in float64 from the
float16-rounded inputs; written as REF, default o_ref.bin). The inputs do
not depend on the lengths. usage: attention_inputs.py OUTDIR [--ref REF] L0 L1 ..."""
import math
import random
import struct
import sys

D, KV = 16, 4096


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def dump(path, values, fmt):
    with open(path, "wb") as f:
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def main():
    out, rest = sys.argv[1], sys.argv[2:]
    ref_name = "o_ref.bin"
    if rest[:1] == ["--ref"]:
        ref_name, rest = rest[1], rest[2:]
    lens = [int(x) for x in rest]
    rng = random.Random(1234)
    tasks = len(lens)
    q = [[f16(rng.uniform(-1, 1)) for _ in range(D)] for _ in range(tasks)]
    k = [[[f16(rng.uniform(-1, 1)) for _ in range(D)] for _ in range(KV)] for _ in range(tasks)]
    v = [[[f16(rng.uniform(-1, 1)) for _ in range(D)] for _ in range(KV)] for _ in range(tasks)]
    dump(out + "/q.bin", [x for r in q for x in r], "e")
    dump(out + "/k.bin", [x for t in k for r in t for x in r], "e")
    dump(out + "/v.bin", [x for t in v for r in t for x in r], "e")
    ref = []
    for t in range(tasks):
        s = [sum(q[t][d] * k[t][j][d] for d in range(D)) * 0.25 for j in range(lens[t])]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        z = sum(w)
        ref += [sum(w[j] * v[t][j][d] for j in range(lens[t])) / z for d in range(D)]
    dump(out + "/" + ref_name, ref, "f")


if __name__ == "__main__":
    main()
