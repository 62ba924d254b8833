/* Fused plans on the host backend (docs/fusion.md): a fused plan gives
   bit-identical results to its unfused plan, through a composite function
   (one call, as the generated dispatch) or part by part; bad fused records
   are diagnosed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "df/fuse.h"
#include "hand_plan.h"
#include "host_test_support.h"
#include "seed_plans.h"

/* combine then finalize on args records 0 and 1, as the generated
   composite does (barrier between parts). */
static void combine_finalize(const df_ctx *c) {
  df_ctx x = *c;
  ht_combine(&x);
  df_ctx_barrier(c);
  x.args = c->args + 1;
  ht_finalize(&x);
}

static df_plan *fused(const df_plan *p, df_fuse_report *r) {
  df_plan *q;
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  assert_int_equal(df_plan_fuse(q, NULL, r).code, DF_OK);
  return q;
}

/* Random lengths, policies and strategies: wherever the unfused plan runs,
   the fused one runs in every order and with 4 threads per CTA, and its
   outputs are bitwise equal. */
static void random_plans_parity(void **state) {
  (void)state;
  df_program *nary = seed_attention_program();
  df_program *assoc = ht_associative_attention_program();
  uint64_t seed = 0xf05e;
  uint32_t groups = 0, compared = 0;
  for (int round = 0; round < 12; round++) {
    uint32_t tasks = ht_rand(&seed, 1, 24), kv[24];
    for (uint32_t t = 0; t < tasks; t++)
      kv[t] = ht_rand(&seed, 0, 3) == 0 ? ht_rand(&seed, 200, 2000) : ht_rand(&seed, 1, 64);
    const ht_combo *combos = ht_combos;
    for (int c = 0; c < HT_COMBOS; c++) {
      const df_program *prog = combos[c].s == DF_REDUCE_STREAMING_TREE ? assoc : nary;
      df_plan *p = ht_schedule(prog, 8, round % 2 ? 4 : 2, kv, tasks, 64, combos[c].p,
                               combos[c].s, c % 2 == 0);
      df_fuse_report r;
      df_plan *q = fused(p, &r);
      groups += r.groups;
      df_packed *ku = ht_pack(p, NULL), *kf = ht_pack(q, NULL);
      df_handler_fn *hu = ht_handlers(ku), *hf = ht_handlers(kf);
      df_host_options o = df_host_options_default();
      float *ru, *rf;
      df_host_result res;
      df_status st = ht_run_attention_with(ku, hu, tasks, 64, &o, &ru, &res);
      df_host_result_free(&res);
      for (int v = 0; st.code == DF_OK && v < 4; v++) {
        o = df_host_options_default();
        o.reverse = v == 1;
        o.quantum = v == 2 ? 1 : 0;
        o.threads = v == 3 ? 4 : 1;
        df_status sf = ht_run_attention_with(kf, hf, tasks, 64, &o, &rf, &res);
        if (sf.code != DF_OK)
          fprintf(stderr, "round %d combo %d variant %d: %s\n", round, c, v,
                  res.diag.report ? res.diag.report : sf.message);
        assert_int_equal(sf.code, DF_OK);
        assert_memory_equal(rf, ru, sizeof(float) * HT_ATTN_ROW * tasks);
        compared++;
        df_host_result_free(&res);
        free(rf);
      }
      free(ru);
      free(hu);
      free(hf);
      df_packed_destroy(ku);
      df_packed_destroy(kf);
      df_plan_destroy(q);
      df_plan_destroy(p);
    }
  }
  fprintf(stderr, "%u fused instructions over the plans, %u fused runs compared\n", groups,
          compared);
  assert_true(groups > 100);
  assert_true(compared >= 100);
  df_program_destroy(assoc);
  df_program_destroy(nary);
}

/* The seed plan fused, packed, with the test handler table. */
typedef struct fused_seed {
  df_plan *p, *q;
  df_packed *k;
  df_handler_fn *h;
} fused_seed;

static fused_seed fused_seed_make(void) {
  fused_seed f;
  f.p = seed_make_plan();
  f.q = fused(f.p, NULL);
  f.k = ht_pack(f.q, NULL);
  f.h = ht_handlers(f.k);
  return f;
}

static void fused_seed_free(fused_seed *f) {
  free(f->h);
  df_packed_destroy(f->k);
  df_plan_destroy(f->q);
  df_plan_destroy(f->p);
}

/* The seed plan: composites through a composite function (one call; the
   inner input slot 3 is written by the first part inside the call) and
   part by part; both equal the unfused run and the reference. */
static void seed_composite_function(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  fused_seed f = fused_seed_make();
  df_packed *k = f.k;
  df_handler_fn *h = f.h;
  assert_int_equal(k->handlers[4].part_count, 2);
  assert_null(h[4]); /* no function for "combine+finalize": parts */
  for (int mode = 0; mode < 2; mode++) {
    h[4] = h[5] = mode ? combine_finalize : NULL;
    for (int threads = 1; threads <= 4; threads += 3) {
      df_host_options o = df_host_options_default();
      o.threads = (uint32_t)threads;
      float *rows;
      df_host_result res;
      df_status st = ht_run_attention_with(k, h, 2, 128, &o, &rows, &res);
      if (st.code != DF_OK)
        fprintf(stderr, "%s\n", res.diag.report ? res.diag.report : st.message);
      assert_int_equal(st.code, DF_OK);
      assert_int_equal(res.cost.instructions, 7);
      ht_check_attention(rows, kv, 2);
      df_host_result_free(&res);
      free(rows);
    }
  }
  fused_seed_free(&f);
}

static void fused_diagnoses(void **state) {
  (void)state;
  fused_seed f = fused_seed_make();
  df_packed *k = f.k;
  df_handler_fn *h = f.h;
  /* neither a composite function nor every part */
  h[2] = NULL;
  df_host_options o = df_host_options_default();
  float *rows;
  df_host_result res;
  df_status st = ht_run_attention_with(k, h, 2, 128, &o, &rows, &res);
  assert_int_equal(st.code, DF_EINVAL);
  assert_int_equal(res.diag.kind, DF_HOST_DIAG_MISSING_HANDLER);
  assert_true(hand_error_has(st, "a fused instruction needs its composite function"));
  df_host_result_free(&res);
  free(rows);
  h[2] = ht_finalize;
  /* args word 15 claiming more parts than records follow */
  uint32_t pi = ht_packed_index(k, 7);
  df_abi_args *a = &k->args[k->instrs[pi].arg_offset / sizeof(df_abi_args)];
  a->reserved1 = 3;
  st = ht_run_attention_with(k, h, 2, 128, &o, &rows, &res);
  assert_int_equal(st.code, DF_EINVAL);
  assert_true(hand_error_has(st, "fuses 3 parts from args record"));
  df_host_result_free(&res);
  free(rows);
  a->reserved1 = 1;
  st = ht_run_attention_with(k, h, 2, 128, &o, &rows, &res);
  assert_true(hand_error_has(st, "args word 15 (fused parts) is 1"));
  df_host_result_free(&res);
  free(rows);
  fused_seed_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_plans_parity),
      cmocka_unit_test(seed_composite_function),
      cmocka_unit_test(fused_diagnoses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
