/* df_split_choose (df-schedule block-size=auto): on the decode-attention
   bench's shapes it picks what bench/attention/cases.py picks (block and
   placement; 8 KV heads per sequence, 132 SMs), and the model and the
   search refuse bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "df/split.h"

#define HKV 8
#define MAX_TASKS (64 * HKV)

static const uint32_t S16[] = {65536, 2006, 3500, 2111, 2747, 1940, 3519, 2806,
                               1212,  3146, 3213, 3189, 773,  1939, 2530, 655};
static const uint32_t S64[] = {
    32768, 32768, 1356, 2457, 1904, 1114, 361,  3465, 3043, 5563, 1655, 1186, 6678,
    4301,  32768, 2997, 1924, 6358, 988,  7260, 2181, 7206, 14102, 1226, 1079, 6034,
    5966,  348,   2470, 2267, 2038, 1246, 3599, 1826, 1163, 1804, 3049, 3016, 8287,
    3964,  2456,  2397, 6118, 605,  778,  3395, 7886, 2977, 1358, 864,  5839, 4974,
    3688,  3551,  2890, 8049, 2046, 919,  1474, 539,  529,  203,  1128, 1212};
static const uint32_t S32[] = {612, 2456, 758,  244,   366,  306, 6126, 2432, 461, 523, 295,
                               421, 5570, 12532, 1787, 604, 123, 203,  1938, 979, 717, 4320,
                               126, 2673, 287,  1134,  457, 768, 6806, 232,  2966, 273};

/* tasks: every sequence once per KV head, sequence-major (cases.py) */
static uint32_t heads(const uint32_t *lens, uint32_t n, uint32_t uniform, uint32_t *out) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t h = 0; h < HKV; h++) out[k++] = lens ? lens[i] : uniform;
  return k;
}

static void expect(const uint32_t *lens, uint32_t n, uint32_t uniform, uint32_t block,
                   bool balance, double model_us) {
  uint32_t t[MAX_TASKS];
  uint32_t count = heads(lens, n, uniform, t);
  df_split_search s = df_split_search_default();
  df_split_choice c;
  df_status st = df_split_choose(t, count, 132, &s, &c);
  assert_false(df_failed(&st));
  assert_int_equal(c.block_size, block);
  assert_int_equal(c.balance_iters, balance);
  assert_int_equal(c.defer_reduces, balance); /* cases.py's "balanced" defers */
  assert_true(c.makespan_us > model_us - 0.05 && c.makespan_us < model_us + 0.05);
}

static void matches_bench_picks(void **state) {
  (void)state;
  expect(NULL, 8, 4096, 2048, false, 40.0);
  expect(NULL, 8, 32768, 16384, false, 282.2);
  expect(NULL, 64, 4096, 4096, false, 294.2);
  expect(NULL, 1, 131072, 8192, false, 144.5);
  expect(S16, 16, 0, 6400, true, 114.3);
  expect(S64, 64, 0, 9472, true, 319.8);
  expect(S32, 32, 0, 4096, true, 75.5);
}

/* The model by hand: 2 SMs, task lengths 512 and 300, block 256, costs 1
   per unit / 10 per partial / reduce 5 + 1 per input / finalize 2 / edge 3.
   round_robin: SM0 = b0(t0, 256) R0 b2(t1, 256) R1, SM1 = b1(t0, 256)
   b3(t1, 44). SM0: b0 ends 266, R0 waits for b1 (266 + 3 edge) and ends
   269 + 5 + 2 + 2 = 278, b2 544, R1 (b3 on SM1 at 320 + 3) 544 + 9 = 553.
   defer_reduces: b0 266, b2 532, R0 541, R1 550. */
static void model_by_hand(void **state) {
  (void)state;
  uint32_t len[] = {512, 300};
  df_split_cost c = {.per_unit_us = 1,
                     .per_partial_us = 10,
                     .reduce_us = 5,
                     .reduce_per_input_us = 1,
                     .finalize_us = 2,
                     .hbm_edge_us = 3,
                     .slot_bytes = 100};
  double t;
  uint64_t held;
  df_status st = df_split_model(len, 2, 2, 256, false, false, &c, &t, &held);
  assert_false(df_failed(&st));
  assert_true(t > 553 - 1e-9 && t < 553 + 1e-9);
  assert_int_equal(held, 800); /* SM0: 2 ITERs + 2 REDUCEs of 2 inputs + 1 */
  st = df_split_model(len, 2, 2, 256, false, true, &c, &t, &held);
  assert_false(df_failed(&st));
  assert_true(t > 550 - 1e-9 && t < 550 + 1e-9);
  /* balance_iters: t0 first; b0 SM0, b1 SM1, then t1's b2 on SM0 (tie:
     lower SM), b3 on SM1: the same queues here */
  st = df_split_model(len, 2, 2, 256, true, true, &c, &t, &held);
  assert_false(df_failed(&st));
  assert_true(t > 550 - 1e-9 && t < 550 + 1e-9);
}

/* defer_reduces leaves a reduce of only its own SM's ITERs right after
   them, as the scheduler does: lengths 100 and 512, block 256, the costs
   above. SM0 = b0(t0, 100) R0 b2(t1, 256), SM1 = b1(t1, 256) R1. SM0: b0
   110, R0 (local) 118, b2 384; SM1: b1 266, R1 waits for b2 (384 + 3) and
   ends 387 + 5 + 2 + 2 = 396 (388 with R0 after b2). */
static void model_keeps_local_reduce(void **state) {
  (void)state;
  uint32_t len[] = {100, 512};
  df_split_cost c = {.per_unit_us = 1,
                     .per_partial_us = 10,
                     .reduce_us = 5,
                     .reduce_per_input_us = 1,
                     .finalize_us = 2,
                     .hbm_edge_us = 3,
                     .slot_bytes = 100};
  double t;
  uint64_t held;
  df_status st = df_split_model(len, 2, 2, 256, false, true, &c, &t, &held);
  assert_false(df_failed(&st));
  assert_true(t > 396 - 1e-9 && t < 396 + 1e-9);
}

static void refuses_bad_input(void **state) {
  (void)state;
  uint32_t len[] = {300, 0};
  df_split_search s = df_split_search_default();
  df_split_choice c;
  df_status st = df_split_choose(len, 2, 4, &s, &c);
  assert_true(df_failed(&st));
  assert_non_null(strstr(st.message, "task 1 has range length 0"));
  len[1] = 5;
  st = df_split_choose(len, 2, 0, &s, &c);
  assert_non_null(strstr(st.message, "sm_count must be positive"));
  st = df_split_choose(len, 0, 4, &s, &c);
  assert_non_null(strstr(st.message, "no range lengths"));
  s.min_block = 1000;
  s.max_block = 600;
  st = df_split_choose(len, 2, 4, &s, &c);
  assert_non_null(strstr(st.message, "no multiple of step 256 in [1000, 600]"));
  s = df_split_search_default();
  s.cost.slot_budget = 1000; /* less than one slot pair */
  st = df_split_choose(len, 2, 4, &s, &c);
  assert_true(df_failed(&st));
  assert_non_null(strstr(st.message, "none of 6 candidate plans fits the slot budget of 1000"));
  double t;
  uint64_t held;
  st = df_split_model(len, 2, 4, 0, false, false, &s.cost, &t, &held);
  assert_non_null(strstr(st.message, "block 0"));
}

/* Bounds and step: only multiples of step in [min, max] are tried. */
static void search_bounds(void **state) {
  (void)state;
  uint32_t t[HKV];
  uint32_t n = heads(NULL, 1, 131072, t);
  df_split_search s = df_split_search_default();
  s.step = 4096;
  s.min_block = 20000;
  s.max_block = 40000;
  df_split_choice c;
  df_status st = df_split_choose(t, n, 132, &s, &c);
  assert_false(df_failed(&st));
  assert_int_equal(c.candidates, 3 * 5); /* 20480 .. 36864 */
  assert_int_equal(c.block_size % 4096, 0);
  assert_true(c.block_size >= 20480 && c.block_size <= 36864);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(matches_bench_picks),
      cmocka_unit_test(model_by_hand),
      cmocka_unit_test(model_keeps_local_reduce),
      cmocka_unit_test(refuses_bad_input),
      cmocka_unit_test(search_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
