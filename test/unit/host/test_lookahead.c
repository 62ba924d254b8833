/* The handler lookahead on the host backend (df_ctx_next_same): the
   backend gives each call its CTA's queue and position, so a handler sees
   the args record of the next ITER of its handler on its CTA, exactly the
   one the packed queue holds there; the attention still checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host_test_support.h"
#include "seed_plans.h"

/* What the wrapped partials saw (the host backend may run CTAs on several
   threads). */
static atomic_uint seen_calls, seen_next, seen_wrong;
static const df_packed *seen_plan;

/* The expected answer from the packed plan itself: the CTA whose queue
   holds the call's args record, then the nearest later ITER of the same
   handler within DF_CTX_LOOKAHEAD, not past EXIT. */
static const df_abi_args *expected_next(const df_packed *k, const df_abi_args *a) {
  for (uint32_t q = 0; q < k->topology.sm_count; q++) {
    const df_abi_instr *queue = &k->instrs[k->queue_offsets[q]];
    for (uint32_t i = 0; i < k->queue_lengths[q]; i++) {
      if (queue[i].opcode == DF_ABI_OP_EXIT ||
          &k->args[queue[i].arg_offset / sizeof(df_abi_args)] != a)
        continue;
      for (uint32_t j = i + 1; j < k->queue_lengths[q] && j <= i + DF_CTX_LOOKAHEAD; j++) {
        if (queue[j].opcode == DF_ABI_OP_EXIT)
          return NULL;
        if (queue[j].opcode == DF_ABI_OP_ITER && queue[j].handler_id == queue[i].handler_id)
          return &k->args[queue[j].arg_offset / sizeof(df_abi_args)];
      }
      return NULL;
    }
  }
  return NULL;
}

static void split_kv_watching(const df_ctx *c) {
  if (df_ctx_thread(c) == 0) {
    const df_abi_args *nx = df_ctx_next_same(c);
    atomic_fetch_add(&seen_calls, 1);
    if (nx)
      atomic_fetch_add(&seen_next, 1);
    if (nx != expected_next(seen_plan, c->args))
      atomic_fetch_add(&seen_wrong, 1);
    /* the next call's coordinates come from the plan's list */
    if (nx && df_args_task_coord(c, nx, 0) != seen_plan->task_coords[nx->task_coord_offset])
      atomic_fetch_add(&seen_wrong, 1);
  }
  ht_split_kv(c);
}

/* Two SMs and many tasks, so every CTA runs several partials; each
   policy and reduce strategy, one and four threads per CTA. */
static void next_same_matches_the_queue(void **state) {
  (void)state;
  df_program *nary = seed_attention_program();
  df_program *assoc = ht_associative_attention_program();
  static const uint32_t kv[6] = {300, 40, 700, 129, 64, 1000};
  for (int c = 0; c < HT_COMBOS; c++) {
    const df_program *prog = ht_combos[c].s == DF_REDUCE_STREAMING_TREE ? assoc : nary;
    df_plan *p = ht_schedule(prog, 2, 1, kv, 6, 128, ht_combos[c].p, ht_combos[c].s, true);
    df_packed *k = ht_pack(p, NULL);
    df_handler_fn *h = ht_handlers(k);
    uint32_t wrapped = 0;
    for (uint32_t i = 0; i < k->handler_count; i++)
      if (h[i] == ht_split_kv) {
        h[i] = split_kv_watching;
        wrapped++;
      }
    assert_int_equal(wrapped, 1);
    for (uint32_t threads = 1; threads <= 4; threads += 3) {
      atomic_store(&seen_calls, 0);
      atomic_store(&seen_next, 0);
      atomic_store(&seen_wrong, 0);
      seen_plan = k;
      df_host_options o = df_host_options_default();
      o.threads = threads;
      float *rows;
      df_status st = ht_run_attention_with(k, h, 6, 128, &o, &rows, NULL);
      assert_int_equal(st.code, DF_OK);
      ht_check_attention(rows, kv, 6);
      free(rows);
      assert_int_equal(atomic_load(&seen_wrong), 0);
      /* every task has a partial; on 2 SMs all but each CTA's last
         partial have a successor */
      assert_true(atomic_load(&seen_calls) >= 6);
      assert_true(atomic_load(&seen_next) + 2 >= atomic_load(&seen_calls));
    }
    free(h);
    df_packed_destroy(k);
    df_plan_destroy(p);
  }
  df_program_destroy(nary);
  df_program_destroy(assoc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(next_same_matches_the_queue),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
