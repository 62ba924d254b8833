/* Host backend op log and cost estimate on the seed plan: record counts
   and contents, text forms, determinism, the structural cost model's
   sums and makespan (derived by hand in docs/host-backend.md), final
   staging and flags, and handler resolution for df-run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host_test_support.h"
#include "seed_plans.h"

static df_packed *seed_packed(df_plan **plan) {
  *plan = seed_make_plan();
  return ht_pack(*plan, NULL);
}

static void run(const df_packed *k, const df_host_options *o, df_host_result *res) {
  float *rows;
  df_status st = ht_run_attention(k, 2, 128, o, &rows, res);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  free(rows);
}

static void op_log_records(void **state) {
  (void)state;
  df_plan *p;
  df_packed *k = seed_packed(&p);
  df_host_result res;
  run(k, NULL, &res);
  uint32_t instrs = 0, exits = 0, comms = 0;
  for (uint32_t i = 0; i < res.op_count; i++) {
    const df_host_op *op = &res.ops[i];
    assert_int_equal(op->seq, i);
    assert_true(op->cta < k->topology.sm_count);
    assert_int_equal(op->queue_pos, op->instr - k->queue_offsets[op->cta]);
    if (op->kind == DF_HOST_OP_COMM) {
      comms++;
      assert_int_equal(op->bytes, 48);
      assert_int_equal(op->comm_kind, k->comms[op->comm].kind);
      assert_int_equal(op->src_slot, op->dst_slot);
      assert_int_not_equal(op->peer_cta, DF_SENTINEL);
      assert_int_not_equal(op->peer_cta, op->cta);
    } else if (op->opcode == DF_ABI_OP_EXIT) {
      exits++;
      assert_int_equal(op->handler_id, DF_SENTINEL);
    } else {
      instrs++;
      assert_int_equal(op->handler_id, k->instrs[op->instr].handler_id);
      uint32_t bytes = 48 * k->instrs[op->instr].comm_count;
      assert_int_equal(op->bytes, bytes);
    }
  }
  assert_int_equal(instrs, 9);
  assert_int_equal(exits, 4);
  assert_int_equal(comms, 6);
  assert_int_equal(res.op_count, 19);
  /* a receive comes after the instruction record of its send */
  for (uint32_t i = 0; i < res.op_count; i++) {
    const df_host_op *op = &res.ops[i];
    if (op->kind != DF_HOST_OP_COMM || !df_comm_kind_is_recv(op->comm_kind))
      continue;
    bool sent = false;
    for (uint32_t j = 0; j < i; j++)
      sent |= res.ops[j].kind == DF_HOST_OP_COMM && res.ops[j].cta == op->peer_cta &&
              !df_comm_kind_is_recv(res.ops[j].comm_kind) && res.ops[j].dst_slot == op->dst_slot;
    assert_true(sent);
  }
  /* deterministic */
  df_host_result again;
  run(k, NULL, &again);
  assert_int_equal(again.op_count, res.op_count);
  assert_memory_equal(again.ops, res.ops, sizeof(df_host_op) * res.op_count);
  df_host_result_free(&again);
  /* final staging and flags: both HBM transfers stored their epochs */
  assert_int_equal(res.staging_bytes, 336);
  assert_int_equal(res.flag_count, 7);
  assert_int_equal(res.flags[2], 1);
  assert_int_equal(res.flags[5], 2);
  assert_int_equal(res.flags[1], 0);
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static char *capture(df_status (*write)(const df_host_result *, FILE *), const df_host_result *r) {
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(write(r, f).code, DF_OK);
  long n = ftell(f);
  rewind(f);
  char *s = calloc((size_t)n + 1, 1);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return s;
}

static void text_forms(void **state) {
  (void)state;
  df_plan *p;
  df_packed *k = seed_packed(&p);
  df_host_result res;
  run(k, NULL, &res);
  char *log = capture(df_host_op_log_write, &res);
  uint32_t lines = 0;
  for (char *c = log; *c; c++)
    lines += *c == '\n';
  assert_int_equal(lines, 19);
  assert_int_equal(strncmp(log, "0 instr cta=0 pos=0 instr=0 opcode=iter handler=0 bytes=0\n", 58),
                   0);
  assert_non_null(strstr(log, " comm cta=1 pos=0 instr=5 comm=3 kind=cluster_send src_slot=1 "
                              "dst_slot=1 bytes=48 peer=0\n"));
  assert_non_null(strstr(log, " instr cta=0 pos=4 instr=4 opcode=exit handler=- bytes=0\n"));
  free(log);
  char *cost = capture(df_host_cost_write, &res);
  assert_non_null(strstr(cost, "cost model: F=40 cycles/instruction R=0.0625 cycles/byte "
                               "cluster_latency=200 hbm_latency=1000\n"));
  assert_non_null(strstr(cost, "cta 0: instructions=4 comms=3 comm_bytes=144 busy=169.00 "
                               "finish=1172.00\n"));
  assert_non_null(strstr(cost, "total: instructions=9 comm_bytes=288 busy=378.00 "
                               "makespan=2255.00 critical_cta=3\n"));
  free(cost);
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void cost_defaults(void **state) {
  (void)state;
  df_plan *p;
  df_packed *k = seed_packed(&p);
  df_host_result res;
  run(k, NULL, &res);
  const df_host_cost *c = &res.cost;
  assert_int_equal(c->cta_count, 4);
  assert_int_equal(c->instructions, 9);
  assert_int_equal(c->comm_bytes, 288);
  assert_true(c->busy_cycles == 9 * 40.0 + 288 * 0.0625);
  const double busy[4] = {169, 43, 43, 123}, finish[4] = {1172, 43, 43, 2255};
  for (uint32_t s = 0; s < 4; s++) {
    assert_true(c->ctas[s].busy_cycles == busy[s]);
    assert_true(c->ctas[s].finish_cycles == finish[s]);
    assert_true(c->makespan_cycles >= c->ctas[s].busy_cycles);
  }
  assert_int_equal(c->ctas[0].instructions, 4);
  assert_int_equal(c->ctas[0].comms, 3);
  assert_true(c->makespan_cycles == 2255);
  assert_int_equal(c->critical_cta, 3);
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void cost_parameters(void **state) {
  (void)state;
  df_plan *p;
  df_packed *k = seed_packed(&p);
  df_host_options o = df_host_options_default();
  o.cost.instr_cycles = 10;
  o.cost.byte_cycles = 1;
  o.cost.cluster_latency = 0;
  o.cost.hbm_latency = 0;
  o.op_log = false;
  df_host_result res;
  run(k, &o, &res);
  assert_int_equal(res.op_count, 0);
  assert_true(res.cost.busy_cycles == 9 * 10.0 + 288);
  assert_true(res.cost.makespan_cycles == 300);
  assert_true(res.cost.params.instr_cycles == 10);
  df_host_result_free(&res);
  /* makespan >= every CTA's sum on a larger plan too */
  static const uint32_t kv[3] = {4000, 700, 2100};
  df_plan *q = seed_schedule_attention(8, 2, kv, 3, 64, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, true);
  df_packed *kq = ht_pack(q, NULL);
  float *rows;
  assert_int_equal(ht_run_attention(kq, 3, 64, NULL, &rows, &res).code, DF_OK);
  uint32_t dispatched = 0;
  for (uint32_t i = 0; i < kq->instr_count; i++)
    dispatched += kq->instrs[i].opcode != DF_ABI_OP_EXIT;
  assert_int_equal(res.cost.instructions, dispatched);
  assert_int_equal(res.cost.comm_bytes, 48ull * kq->comm_count);
  for (uint32_t s = 0; s < res.cost.cta_count; s++)
    assert_true(res.cost.makespan_cycles >= res.cost.ctas[s].finish_cycles &&
                res.cost.ctas[s].finish_cycles >= res.cost.ctas[s].busy_cycles);
  free(rows);
  df_host_result_free(&res);
  df_packed_destroy(kq);
  df_plan_destroy(q);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

typedef struct {
  const char *name;
  df_handler_fn fn;
} entry;

static void *lookup(void *user, const char *symbol) {
  for (const entry *e = user; e->name; e++)
    if (!strcmp(e->name, symbol)) {
      void *p;
      memcpy(&p, &e->fn, sizeof p);
      return p;
    }
  return NULL;
}

static void resolve_handlers(void **state) {
  (void)state;
  df_plan *p;
  df_packed *k = seed_packed(&p);
  entry table[] = {{"dataflow_handler_0_split_kv", ht_split_kv},
                   {"dataflow_handler_1_combine", ht_combine},
                   {"dataflow_handler_2_finalize", ht_finalize},
                   {"dataflow_handler_3_combine", ht_combine},
                   {NULL, NULL}};
  df_handler_fn fns[4];
  assert_int_equal(df_host_resolve_handlers(k, lookup, table, fns).code, DF_OK);
  assert_true(fns[0] == ht_split_kv && fns[3] == ht_combine);
  table[3].name = NULL;
  df_status st = df_host_resolve_handlers(k, lookup, table, fns);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "handler 3 'combine' (reduce): symbol "
                                     "'dataflow_handler_3_combine' not found"));
  df_packed_destroy(k);
  df_plan_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(op_log_records),
      cmocka_unit_test(text_forms),
      cmocka_unit_test(cost_defaults),
      cmocka_unit_test(cost_parameters),
      cmocka_unit_test(resolve_handlers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
