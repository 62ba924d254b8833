/* The handler context's lookahead (df/device.h, df_ctx_next_same): the
   nearest ITER of the running instruction's handler id within
   DF_CTX_LOOKAHEAD instructions, never past EXIT or the queue's end, with
   the plan's args and task coordinates even when `args` / `task_coords`
   point at a staged copy; NULL without a queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "df/device.h"

#define N 8

typedef struct fixture {
  df_abi_instr queue[N];
  df_abi_args args[N];
  uint32_t coords[2 * N];
  df_ctx ctx;
} fixture;

/* Instruction i has args record i (task coordinates 10 i, 10 i + 1) and
   handler `h[i]`, opcode `op[i]`. */
static void setup(fixture *f, const uint32_t *op, const uint32_t *h, uint32_t length) {
  memset(f, 0, sizeof *f);
  for (uint32_t i = 0; i < length; i++) {
    f->queue[i].opcode = op[i];
    f->queue[i].handler_id = h[i];
    f->queue[i].arg_offset = i * (uint32_t)sizeof(df_abi_args);
    f->args[i].task_coord_offset = 2 * i;
    f->args[i].task_coord_count = 2;
    f->args[i].range_begin = 100 * i;
    f->args[i].range_end = 100 * i + 50;
    f->coords[2 * i] = 10 * i;
    f->coords[2 * i + 1] = 10 * i + 1;
  }
  f->ctx.queue = f->queue;
  f->ctx.queue_length = length;
  f->ctx.plan_args = (const uint8_t *)f->args;
  f->ctx.plan_task_coords = f->coords;
}

enum { I = DF_ABI_OP_ITER, R = DF_ABI_OP_REDUCE, F = DF_ABI_OP_FINALIZE, X = DF_ABI_OP_EXIT };

/* partial, finalize, partial, finalize, partial, exit: each partial finds
   the next one past the finalize; the last finds none. */
static void skips_other_instructions(void **state) {
  (void)state;
  static const uint32_t op[] = {I, F, I, F, I, X};
  static const uint32_t h[] = {3, 5, 3, 5, 3, DF_SENTINEL};
  fixture f;
  setup(&f, op, h, 6);
  f.ctx.pc = 0;
  assert_ptr_equal(df_ctx_next_same(&f.ctx), &f.args[2]);
  f.ctx.pc = 2;
  const df_abi_args *nx = df_ctx_next_same(&f.ctx);
  assert_ptr_equal(nx, &f.args[4]);
  assert_int_equal(df_args_task_coord(&f.ctx, nx, 0), 40);
  assert_int_equal(df_args_task_coord(&f.ctx, nx, 1), 41);
  assert_int_equal(nx->range_begin, 400);
  f.ctx.pc = 4;
  assert_null(df_ctx_next_same(&f.ctx));
  /* Only ITERs match: a finalize finds none. */
  f.ctx.pc = 1;
  assert_null(df_ctx_next_same(&f.ctx));
}

/* The nearest match wins; another handler's ITER and a REDUCE of the same
   handler id do not match; nothing beyond DF_CTX_LOOKAHEAD. */
static void nearest_within_the_window(void **state) {
  (void)state;
  static const uint32_t op[] = {I, I, R, I, I, I, I, X};
  static const uint32_t h[] = {3, 4, 3, 3, 3, 4, 3, DF_SENTINEL};
  fixture f;
  setup(&f, op, h, 8);
  f.ctx.pc = 0;
  assert_ptr_equal(df_ctx_next_same(&f.ctx), &f.args[3]);
  _Static_assert(DF_CTX_LOOKAHEAD == 4, "the window below assumes 4");
  static const uint32_t op2[] = {I, I, I, I, I, I, X};
  static const uint32_t h2[] = {3, 5, 5, 5, 5, 3, DF_SENTINEL};
  setup(&f, op2, h2, 7);
  f.ctx.pc = 0;
  assert_null(df_ctx_next_same(&f.ctx)); /* instruction 5 is 5 ahead */
  f.ctx.pc = 1;
  assert_ptr_equal(df_ctx_next_same(&f.ctx), &f.args[2]);
}

/* Not past EXIT, not past the queue's end (a queue without EXIT), and
   nothing at all without a queue. */
static void stops_at_exit_and_end(void **state) {
  (void)state;
  static const uint32_t op[] = {I, X, I};
  static const uint32_t h[] = {3, DF_SENTINEL, 3};
  fixture f;
  setup(&f, op, h, 3);
  f.ctx.pc = 0;
  assert_null(df_ctx_next_same(&f.ctx));
  static const uint32_t op2[] = {I, I, I};
  static const uint32_t h2[] = {3, 3, 3};
  setup(&f, op2, h2, 2); /* the third record is past the length */
  f.ctx.pc = 1;
  assert_null(df_ctx_next_same(&f.ctx));
  f.ctx.pc = 0;
  assert_ptr_equal(df_ctx_next_same(&f.ctx), &f.args[1]);
  f.ctx.queue = NULL;
  assert_null(df_ctx_next_same(&f.ctx));
}

/* A staged instruction's ctx (args and task_coords in a copy) still sees
   the plan's records for the next instruction. */
static void plan_records_when_staged(void **state) {
  (void)state;
  static const uint32_t op[] = {I, I, X};
  static const uint32_t h[] = {3, 3, DF_SENTINEL};
  fixture f;
  setup(&f, op, h, 3);
  df_abi_args staged = f.args[0];
  uint32_t staged_coords[2] = {77, 78};
  staged.task_coord_offset = 0;
  f.ctx.args = &staged;
  f.ctx.task_coords = staged_coords;
  f.ctx.pc = 0;
  const df_abi_args *nx = df_ctx_next_same(&f.ctx);
  assert_ptr_equal(nx, &f.args[1]);
  assert_int_equal(df_args_task_coord(&f.ctx, nx, 0), 10);
  assert_int_equal(df_args_task_coord(&f.ctx, nx, 1), 11);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(skips_other_instructions),
      cmocka_unit_test(nearest_within_the_window),
      cmocka_unit_test(stops_at_exit_and_end),
      cmocka_unit_test(plan_records_when_staged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
