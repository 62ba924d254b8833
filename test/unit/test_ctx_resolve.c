/* The handler context's resolved addresses (df/device.h): df_ctx_resolve
   gives exactly the addresses the records give for every slot kind; the
   accessors return the resolved ones only while `resolved_for` is the
   current args record, and read the records again once args moves on (a
   composite's later part) or after a reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "df/device.h"

typedef struct fixture {
  df_abi_slot slots[4];
  uint32_t input_slots[4];
  df_abi_args args[3];
  uint8_t arena[256], scratch[256], staging[256];
  df_ctx ctx;
} fixture;

/* Slots 0 shared, 1 direct-global, 2 scratch-backed, 3 shared. args[0]
   reads slots 1, 2 and writes 0; args[1] (a composite's second part)
   reads 3 and writes 2; args[2] reads nothing and writes nothing. */
static void setup(fixture *f) {
  memset(f, 0, sizeof *f);
  f->slots[0].shared_offset = 16;
  f->slots[1].flags = DF_SLOT_FLAG_HBM_DIRECT_GLOBAL;
  f->slots[1].global_offset = 64;
  f->slots[2].flags = DF_SLOT_FLAG_SCRATCH_BACKED;
  f->slots[2].shared_offset = 32;
  f->slots[3].shared_offset = 128;
  f->input_slots[0] = 1;
  f->input_slots[1] = 2;
  f->input_slots[2] = 3;
  f->args[0].input_slot_offset = 0;
  f->args[0].input_slot_count = 2;
  f->args[0].output_slot = 0;
  f->args[1].input_slot_offset = 2;
  f->args[1].input_slot_count = 1;
  f->args[1].output_slot = 2;
  f->args[2].input_slot_count = 0;
  f->args[2].output_slot = DF_SENTINEL;
  f->ctx.slots = f->slots;
  f->ctx.input_slots = f->input_slots;
  f->ctx.shared_slots = f->arena;
  f->ctx.scratch = f->scratch;
  f->ctx.global_staging = f->staging;
  f->ctx.args = &f->args[0];
}

static void resolve_matches_records(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  df_ctx_resolve(&f.ctx, &f.args[0]);
  assert_ptr_equal(f.ctx.resolved_for, &f.args[0]);
  assert_ptr_equal(f.ctx.resolved_input0, f.staging + 64);
  assert_ptr_equal(f.ctx.resolved_output, f.arena + 16);
  assert_ptr_equal(df_ctx_input(&f.ctx, 0), f.staging + 64);
  assert_ptr_equal(df_ctx_input(&f.ctx, 1), f.scratch + 32); /* not resolved: records */
  assert_ptr_equal(df_ctx_output(&f.ctx), f.arena + 16);
  /* Scratch-backed output and a shared input. */
  f.ctx.args = &f.args[1];
  df_ctx_resolve(&f.ctx, &f.args[1]);
  assert_ptr_equal(f.ctx.resolved_input0, f.arena + 128);
  assert_ptr_equal(f.ctx.resolved_output, f.scratch + 32);
}

static void no_input_no_output_resolve_to_null(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  f.ctx.args = &f.args[2];
  df_ctx_resolve(&f.ctx, &f.args[2]);
  assert_null(f.ctx.resolved_input0);
  assert_null(f.ctx.resolved_output);
  assert_null(df_ctx_output(&f.ctx));
}

/* The accessors take the resolved addresses as they are while they are
   current (planted values show it), and the records otherwise. */
static void resolved_only_while_current(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  df_ctx_resolve(&f.ctx, &f.args[0]);
  f.ctx.resolved_input0 = f.arena + 200;
  f.ctx.resolved_output = f.arena + 208;
  assert_ptr_equal(df_ctx_input(&f.ctx, 0), f.arena + 200);
  assert_ptr_equal(df_ctx_output(&f.ctx), f.arena + 208);
  /* A composite's second part: args moves on, the records answer. */
  df_ctx part = f.ctx;
  part.args = &f.args[1];
  assert_ptr_equal(df_ctx_input(&part, 0), f.arena + 128);
  assert_ptr_equal(df_ctx_output(&part), f.scratch + 32);
  /* Unresolved (zeroed, as a fresh context): the records. */
  f.ctx.resolved_for = NULL;
  assert_ptr_equal(df_ctx_input(&f.ctx, 0), f.staging + 64);
  assert_ptr_equal(df_ctx_output(&f.ctx), f.arena + 16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(resolve_matches_records),
      cmocka_unit_test(no_input_no_output_resolve_to_null),
      cmocka_unit_test(resolved_only_while_current),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
