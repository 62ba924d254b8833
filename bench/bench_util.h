/* What the bench programs share: clocks, medians, status checks, the
   xorshift and log-normal length draws and the schedule options of a
   decode step. Benchmarks only; nothing here is a library API. */
#ifndef DF_BENCH_UTIL_H
#define DF_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "df/plan.h"

/* PTX for the driver's JIT: the module header, then a one-thread clock
   spin entry NAME(.param .u64 cycles). Queued before a timed launch, the
   spin makes the launch wait on the GPU when the start event fires, so
   the events time the GPU's work and not the host's submission. */
#define BENCH_PTX_HEADER ".version 8.0\n.target sm_90a\n.address_size 64\n"
#define BENCH_SPIN_PTX(name)                                                                       \
  ".visible .entry " name "(.param .u64 cycles) {\n"                                               \
  "  .reg .u64 %r<4>; .reg .pred %p;\n"                                                            \
  "  ld.param.u64 %r1, [cycles];\n"                                                                \
  "  mov.u64 %r2, %clock64;\n"                                                                     \
  "LOOP:\n"                                                                                        \
  "  mov.u64 %r3, %clock64; sub.u64 %r3, %r3, %r2;\n"                                              \
  "  setp.lt.u64 %p, %r3, %r1; @%p bra LOOP;\n"                                                    \
  "  ret;\n}\n"

/* Wall-clock time (CLOCK_MONOTONIC) in microseconds. */
double bench_wall_us(void);

/* CPU time of the calling thread (user + system) in microseconds: for
   single-threaded CPU-bound passes on a shared machine, where wall time
   also counts the time other processes hold the core. */
double bench_thread_cpu_us(void);

/* Prints "BENCH: WHAT: message" to stderr and exits with 1 when S is not
   DF_OK. */
void bench_check(const char *bench, df_status s, const char *what);

/* Sorts V[0..N) ascending and returns V[N / 2] (the upper median when N
   is even). N > 0. */
double bench_median_upper(double *v, size_t n);

/* Sorts V[0..N) ascending and returns its median, the mean of the middle
   two when N is even. N > 0. */
double bench_median(double *v, size_t n);

/* One xorshift32 step of *X (never 0 when *X is not 0). */
uint32_t bench_xorshift(uint32_t *x);

typedef struct bench_rng {
  uint64_t s;
} bench_rng;

/* Uniform in (0, 1) (a 64-bit LCG's top 53 bits). */
double bench_uniform(bench_rng *r);

/* A log-normal decode length: median 2048, sigma 1, in [16, LMAX]. */
uint32_t bench_decode_length(bench_rng *r, uint32_t lmax);

/* Options of one kv range of TASKS lengths KV on SMS SMs in clusters of
   CLUSTER, blocks of BLOCK, with the policy and reduce strategy given. */
df_schedule_options bench_kv_options(uint32_t sms, uint32_t cluster, uint32_t block,
                                     const uint32_t *kv, uint32_t tasks, df_policy pol,
                                     df_reduce_strategy strat);

/* A decode step of SEQS sequences x 8 KV heads: new lengths LENS[SEQS * 8]
   (one bench_decode_length per sequence, the same for its 8 heads) and the
   options that schedule them, block BLOCK, extents (SEQS, 8), balance-iters,
   the default topology (the caller sets its own). LENS must outlive the
   options. */
df_schedule_options bench_decode_step(bench_rng *r, uint32_t seqs, uint32_t lmax,
                                      uint32_t *lens, uint32_t block);

#endif
