/* The feature bits of a plan (df/kernel_plan.h): each comm kind and slot
   flag turns on its path, a cluster send from a scratch-backed slot also
   needs the run-time source test (its source lifetime is not
   precomputed, REFERENCE 5.5), a kernel covers exactly the plans whose
   bits it has, and a comm naming a slot outside the table reads nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "df/kernel_plan.h"

static df_abi_comm send_from(uint32_t slot) {
  df_abi_comm c;
  memset(&c, 0, sizeof c);
  c.kind = DF_COMM_CLUSTER_SEND;
  c.src_slot_id = slot;
  c.dst_slot_id = 0;
  return c;
}

static void kinds_and_flags(void **state) {
  (void)state;
  df_abi_slot slots[3];
  memset(slots, 0, sizeof slots);
  assert_int_equal(df_plan_features_of(NULL, 0, slots, 3, 1), 0);
  assert_int_equal(df_plan_features_of(NULL, 0, slots, 3, 2), DF_FEATURE_CLUSTER);
  df_abi_comm c[2];
  memset(c, 0, sizeof c);
  c[0].kind = DF_COMM_HBM_RECV;
  c[0].segment_count = 2;
  c[1].kind = DF_COMM_CLUSTER_RECV;
  assert_int_equal(df_plan_features_of(c, 2, slots, 3, 1),
                   DF_FEATURE_HBM | DF_FEATURE_HBM_BULK | DF_FEATURE_CLUSTER_RECV);
  slots[1].flags = DF_SLOT_FLAG_SCRATCH_BACKED;
  slots[2].flags = DF_SLOT_FLAG_HBM_DIRECT_GLOBAL;
  assert_int_equal(df_plan_features_of(NULL, 0, slots, 3, 1),
                   DF_FEATURE_SCRATCH | DF_FEATURE_DIRECT_GLOBAL);
}

static void source_test_for_scratch_sources(void **state) {
  (void)state;
  df_abi_slot slots[2];
  memset(slots, 0, sizeof slots);
  slots[1].flags = DF_SLOT_FLAG_SCRATCH_BACKED;
  df_abi_comm shared = send_from(0), scratch = send_from(1), outside = send_from(7);
  /* A send from a shared slot: the packer's actions are trusted. */
  uint32_t f = df_plan_features_of(&shared, 1, slots, 2, 2);
  assert_true(f & DF_FEATURE_CLUSTER_SEND);
  assert_false(f & DF_FEATURE_SOURCE_TEST);
  /* From a scratch-backed slot: the run-time test too. */
  f = df_plan_features_of(&scratch, 1, slots, 2, 2);
  assert_true(f & DF_FEATURE_SOURCE_TEST);
  /* A slot id outside the table is not read (the blob checks refuse it). */
  f = df_plan_features_of(&outside, 1, slots, 2, 2);
  assert_false(f & DF_FEATURE_SOURCE_TEST);
  /* A scratch slot nobody sends from needs no test. */
  df_abi_comm recv = scratch;
  recv.kind = DF_COMM_CLUSTER_RECV;
  assert_false(df_plan_features_of(&recv, 1, slots, 2, 2) & DF_FEATURE_SOURCE_TEST);
}

static void coverage(void **state) {
  (void)state;
  const uint32_t plan = DF_FEATURE_CLUSTER | DF_FEATURE_CLUSTER_SEND | DF_FEATURE_SOURCE_TEST;
  assert_true(df_plan_features_cover(DF_FEATURES_ALL, plan));
  assert_false(df_plan_features_cover(DF_FEATURE_CLUSTER | DF_FEATURE_CLUSTER_SEND, plan));
  /* A kernel with the test runs a precomputed plan too (it tests more). */
  assert_true(df_plan_features_cover(plan, DF_FEATURE_CLUSTER | DF_FEATURE_CLUSTER_SEND));
  assert_int_equal(DF_FEATURES_ALL & DF_FEATURE_SOURCE_TEST, DF_FEATURE_SOURCE_TEST);
  assert_int_equal(df_plan_features_kinds(DF_FEATURE_SOURCE_TEST), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kinds_and_flags),
      cmocka_unit_test(source_test_for_scratch_sources),
      cmocka_unit_test(coverage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
