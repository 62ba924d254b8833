/* bench/smrate's host arithmetic (bench/smrate/sm_rate_stats.c): the work
   tables of the probe's layouts cover every unit as described (even,
   16 CTAs per head, ranges shared by S CTAs), a weighted split is
   contiguous and proportional and refuses what it cannot split, and the
   median and Pearson correlation are right on known data. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../bench/smrate/sm_rate_stats.h"

#define LEN 1024u
static uint32_t table[LEN];

static void even_covers_every_unit_once(void **state) {
  (void)state;
  assert_int_equal(smr_layout_table(table, LEN, 132, SMR_EVEN), 0);
  uint32_t next = 0, lo = UINT32_MAX, hi = 0;
  for (uint32_t b = 0; b < 132; b++) {
    assert_int_equal(table[2 * b], next); /* contiguous, in block order */
    next += table[2 * b + 1];
    lo = table[2 * b + 1] < lo ? table[2 * b + 1] : lo;
    hi = table[2 * b + 1] > hi ? table[2 * b + 1] : hi;
  }
  assert_int_equal(next, SMR_UNITS);
  assert_true(hi - lo <= 1);
  assert_int_equal(table[1], SMR_UNITS / 132 + 1); /* the remainder to the first */
}

static void heads16_is_the_round_robin_plan(void **state) {
  (void)state;
  assert_int_equal(smr_layout_table(table, LEN, 132, SMR_HEADS16), 0);
  for (uint32_t b = 0; b < 128; b++) {
    assert_int_equal(table[2 * b], b / 16 * SMR_ROWS + b % 16 * 8192u);
    assert_int_equal(table[2 * b + 1], 8192u);
  }
  for (uint32_t b = 128; b < 132; b++) /* idle */
    assert_int_equal(table[2 * b + 1], 0);
}

static void shared_ranges_are_read_by_s_ctas(void **state) {
  (void)state;
  assert_int_equal(smr_layout_table(table, LEN, 132, 4), 0);
  uint32_t next = 0;
  for (uint32_t r = 0; r < 33; r++) {
    for (uint32_t b = 4 * r; b < 4 * r + 4; b++) {
      assert_int_equal(table[2 * b], table[8 * r]);
      assert_int_equal(table[2 * b + 1], table[8 * r + 1]);
    }
    assert_int_equal(table[8 * r], next);
    next += table[8 * r + 1];
  }
  assert_int_equal(next, SMR_UNITS); /* 33 ranges cover every unit once */
  /* a partial last group: 5 CTAs in pairs -> 3 ranges, CTA 4 alone */
  assert_int_equal(smr_layout_table(table, LEN, 5, 2), 0);
  assert_int_equal(table[2 * 4], table[2 * 0] + table[1] + table[2 * 2 + 1]);
  assert_int_equal(table[2 * 4] + table[2 * 4 + 1], SMR_UNITS);
  /* one range read by every CTA */
  assert_int_equal(smr_layout_table(table, LEN, 132, 132), 0);
  assert_int_equal(table[2 * 131], 0);
  assert_int_equal(table[2 * 131 + 1], SMR_UNITS);
}

static void layout_refuses_bad_shapes(void **state) {
  (void)state;
  assert_int_equal(smr_layout_table(table, LEN, 0, SMR_EVEN), -1);
  assert_int_equal(smr_layout_table(table, LEN, LEN / 2 + 1, SMR_EVEN), -1);
  assert_int_equal(smr_layout_table(table, LEN, 132, -1), -1);
}

static void weighted_split_is_proportional(void **state) {
  (void)state;
  const uint32_t idx[3] = {7, 2, 40};
  double w[64] = {0};
  w[7] = 1.0;
  w[2] = 2.0;
  w[40] = 1.0;
  memset(table, 0xff, sizeof table);
  assert_int_equal(smr_split_weighted(table, LEN, idx, w, 3), 0);
  assert_int_equal(table[2 * 7], 0); /* in IDX order */
  assert_int_equal(table[2 * 7 + 1], SMR_UNITS / 4);
  assert_int_equal(table[2 * 2], SMR_UNITS / 4);
  assert_int_equal(table[2 * 2 + 1], SMR_UNITS / 2);
  assert_int_equal(table[2 * 40], 3 * (SMR_UNITS / 4));
  assert_int_equal(table[2 * 40 + 1], SMR_UNITS / 4);
  assert_int_equal(table[2 * 3 + 1], 0); /* every other entry zeroed */
  /* a remainder goes one unit each to the first indices */
  const uint32_t three[3] = {0, 1, 2};
  double eq[3] = {1.0, 1.0, 1.0};
  assert_int_equal(smr_split_weighted(table, LEN, three, eq, 3), 0);
  assert_int_equal(table[1] + table[3] + table[5], SMR_UNITS);
  assert_int_equal(table[1], SMR_UNITS / 3 + (SMR_UNITS % 3 > 0));
  assert_int_equal(table[4], table[1] + table[3]);
}

static void weighted_split_refuses(void **state) {
  (void)state;
  const uint32_t idx[2] = {0, 1}, far[1] = {LEN / 2};
  double zero[2] = {0.0, 0.0}, neg[2] = {1.0, -1.0}, nan_w[2] = {1.0, NAN};
  assert_int_equal(smr_split_weighted(table, LEN, idx, zero, 2), -1);
  assert_int_equal(smr_split_weighted(table, LEN, idx, neg, 2), -1);
  assert_int_equal(smr_split_weighted(table, LEN, idx, nan_w, 2), -1);
  assert_int_equal(smr_split_weighted(table, LEN, far, zero, 1), -1);
  assert_int_equal(smr_split_weighted(table, LEN, idx, zero, 0), -1);
}

static void median_and_pearson(void **state) {
  (void)state;
  double odd[5] = {5, 1, 4, 2, 3}, even[4] = {4, 1, 3, 2};
  assert_true(smr_median(odd, 5) == 3.0);
  assert_true(smr_median(even, 4) == 2.5);
  const double a[4] = {1, 2, 3, 4}, up[4] = {2, 4, 6, 8}, down[4] = {8, 6, 4, 2},
               flat[4] = {3, 3, 3, 3}, b[4] = {1, 3, 2, 4};
  assert_true(fabs(smr_pearson(a, up, 4) - 1.0) < 1e-12);
  assert_true(fabs(smr_pearson(a, down, 4) + 1.0) < 1e-12);
  assert_true(smr_pearson(a, flat, 4) == 0.0);
  assert_true(fabs(smr_pearson(a, b, 4) - 0.8) < 1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(even_covers_every_unit_once),
      cmocka_unit_test(heads16_is_the_round_robin_plan),
      cmocka_unit_test(shared_ranges_are_read_by_s_ctas),
      cmocka_unit_test(layout_refuses_bad_shapes),
      cmocka_unit_test(weighted_split_is_proportional),
      cmocka_unit_test(weighted_split_refuses),
      cmocka_unit_test(median_and_pearson),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
