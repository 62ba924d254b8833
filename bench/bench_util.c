/* See bench_util.h. */
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_us(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

double bench_wall_us(void) { return clock_us(CLOCK_MONOTONIC); }

double bench_thread_cpu_us(void) { return clock_us(CLOCK_THREAD_CPUTIME_ID); }

void bench_check(const char *bench, df_status s, const char *what) {
  if (s.code != DF_OK) {
    fprintf(stderr, "%s: %s: %s\n", bench, what, s.message);
    exit(1);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median_upper(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return v[n / 2];
}

double bench_median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint32_t bench_xorshift(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

double bench_uniform(bench_rng *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return ((r->s >> 11) + 0.5) / 9007199254740992.0;
}

uint32_t bench_decode_length(bench_rng *r, uint32_t lmax) {
  double z = sqrt(-2.0 * log(bench_uniform(r))) * cos(6.283185307179586 * bench_uniform(r));
  double v = 2048.0 * exp(z);
  return v < 16 ? 16 : v > lmax ? lmax : (uint32_t)v;
}

df_schedule_options bench_kv_options(uint32_t sms, uint32_t cluster, uint32_t block,
                                     const uint32_t *kv, uint32_t tasks, df_policy pol,
                                     df_reduce_strategy strat) {
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = sms;
  o.topology.cluster_size = cluster;
  o.block_size = block;
  o.range_count = 1;
  o.ranges[0].axis = "kv";
  o.ranges[0].count = tasks;
  o.ranges[0].lengths = kv;
  o.policy = pol;
  o.strategy = strat;
  return o;
}

df_schedule_options bench_decode_step(bench_rng *r, uint32_t seqs, uint32_t lmax,
                                      uint32_t *lens, uint32_t block) {
  for (uint32_t s = 0; s < seqs; s++) {
    uint32_t len = bench_decode_length(r, lmax);
    for (uint32_t h = 0; h < 8; h++)
      lens[s * 8 + h] = len;
  }
  df_schedule_options d = df_schedule_options_default();
  df_schedule_options o =
      bench_kv_options(d.topology.sm_count, d.topology.cluster_size, block, lens, seqs * 8,
                       d.policy, d.strategy);
  o.extent_count = 2;
  o.extents[0] = seqs;
  o.extents[1] = 8;
  o.balance_iters = true;
  return o;
}
