#include "rt_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "df/blob.h"
#include "seed_plans.h"

const char FX_PTX[] = "//\n.version 8.7\n.target sm_90a\n.address_size 64\n"
                      ".visible .entry df_persistent_kernel()\n{\n ret;\n}\n";

void fx_ok(df_status s) {
  if (s.code != DF_OK)
    fail_msg("unexpected failure (%s): %s", df_code_name(s.code), s.message);
}

void fx_fails(df_status s, df_code code, const char *fragment) {
  if (s.code == DF_OK)
    fail_msg("expected a failure containing '%s', got success", fragment);
  if (s.code != code)
    fail_msg("expected code %s, got %s: %s", df_code_name(code), df_code_name(s.code),
             s.message);
  if (!strstr(s.message, fragment))
    fail_msg("message lacks '%s': %s", fragment, s.message);
}

void fx_open(rt_fixture *f) {
  memset(f, 0, sizeof *f);
  df_cuda_driver d = fake_driver();
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.driver = &d;
  fx_ok(df_rt_create(&o, &f->rt));
  fx_ok(df_rt_device_open(f->rt, 0, &f->dev));
  fx_ok(df_rt_module_load(f->dev, FX_PTX, strlen(FX_PTX), NULL, &f->mod));
}

void fx_close(rt_fixture *f) {
  df_rt_module_unload(f->mod);
  df_rt_device_close(f->dev);
  df_rt_destroy(f->rt);
  memset(f, 0, sizeof *f);
  assert_int_equal(fake_live_blocks(), 0);
}

df_rt_plan *fx_plan(df_rt *rt, df_plan *plan, uint32_t block_size) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_plan_destroy(plan);
  df_rt_plan *p;
  fx_ok(df_rt_plan_from_packed(rt, k, NULL, block_size, &p));
  return p;
}

df_rt_plan *fx_seed_plan(df_rt *rt) { return fx_plan(rt, seed_make_plan(), 128); }

df_rt_plan *fx_pool_plan(df_rt *rt) {
  df_program *prog = seed_attention_program();
  const uint32_t kv[2] = {384, 256};
  df_schedule_options so = df_schedule_options_default();
  so.topology = (df_topology){4, 2};
  so.block_size = 128;
  so.range_count = 1;
  so.ranges[0] = (df_range_lengths){"kv", 2, kv, NULL};
  so.extent_count = 1;
  so.extents[0] = 2;
  so.pool = true;
  df_plan *plan;
  fx_ok(df_schedule(prog, &so, &plan));
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_plan_destroy(plan);
  size_t len;
  uint8_t *bytes;
  fx_ok(df_blob_write(k, prog, NULL, &bytes, &len));
  df_packed_destroy(k);
  df_program_destroy(prog);
  df_rt_plan *p;
  fx_ok(df_rt_plan_from_blob(rt, bytes, len, &p));
  free(bytes);
  return p;
}

df_rt_plan *fx_cluster_plan(df_rt *rt) {
  const uint32_t kv[2] = {256, 256};
  return fx_plan(rt,
                 seed_schedule_attention(4, 2, kv, 2, 128, DF_POLICY_CLUSTER_LOCAL,
                                         DF_REDUCE_ALL_AT_ONCE, true),
                 128);
}
