"""Inputs and a float64 reference for the seed attention program with the
C handlers of examples/seed/attention_handlers.c (head dim D = 16, K/V task
stride 4096 rows, scale 1/4): softmax attention of each task's query over
its first L keys, from the float16-rounded inputs."""

from __future__ import annotations

import array
import math
import random
import struct
from pathlib import Path

import dataflow as df

D, KV_STRIDE, SCALE = 16, 4096, 0.25
REPO = Path(__file__).resolve().parents[2]
HANDLERS = REPO / "examples" / "seed" / "attention_handlers.c"


def f16(x: float) -> float:
    return struct.unpack("<e", struct.pack("<e", x))[0]


class AttentionData:
    """Q [tasks][D], K and V [tasks][KV_STRIDE][D] as float16 host buffers
    (rows past ``max_len`` are zero), O [tasks][D] float32."""

    def __init__(self, tasks: int = 2, max_len: int = 384, seed: int = 1234):
        rng = random.Random(seed)
        self.tasks = tasks
        self.q = [[f16(rng.uniform(-1, 1)) for _ in range(D)] for _ in range(tasks)]
        self.k = [[[f16(rng.uniform(-1, 1)) for _ in range(D)] for _ in range(max_len)]
                  for _ in range(tasks)]
        self.v = [[[f16(rng.uniform(-1, 1)) for _ in range(D)] for _ in range(max_len)]
                  for _ in range(tasks)]
        self.Q = df.HostTensor(bytearray(struct.pack(f"<{tasks * D}e",
                                                     *[x for r in self.q for x in r])),
                               "float16", (tasks, D))
        self.K = df.HostTensor(self._kv(self.k), "float16", (tasks, KV_STRIDE, D))
        self.V = df.HostTensor(self._kv(self.v), "float16", (tasks, KV_STRIDE, D))
        self.O = array.array("f", [0.0] * (tasks * D))

    @staticmethod
    def _kv(rows) -> bytearray:
        buf = bytearray(len(rows) * KV_STRIDE * D * 2)
        for t, task_rows in enumerate(rows):
            flat = [x for r in task_rows for x in r]
            struct.pack_into(f"<{len(flat)}e", buf, t * KV_STRIDE * D * 2, *flat)
        return buf

    def reference(self, lengths) -> list:
        out = []
        for t, n in enumerate(lengths):
            s = [sum(self.q[t][d] * self.k[t][j][d] for d in range(D)) * SCALE for j in range(n)]
            m = max(s)
            w = [math.exp(x - m) for x in s]
            z = sum(w)
            out += [sum(w[j] * self.v[t][j][d] for j in range(n)) / z for d in range(D)]
        return out

    def max_error(self, lengths, output=None) -> float:
        output = self.O if output is None else output
        return max(abs(a - b) for a, b in zip(output, self.reference(lengths)))
