/* Shared set-up of libdfrt's unit tests: a runtime on the fake driver, a
   device, a module, and plans from the seed programs. */
#ifndef DF_TEST_RT_FIXTURE_H
#define DF_TEST_RT_FIXTURE_H

#include "df/runtime.h"
#include "fake_driver.h"

typedef struct rt_fixture {
  df_rt *rt;
  df_rt_device *dev;
  df_rt_module *mod;
} rt_fixture;

/* A PTX image the fake driver accepts. */
extern const char FX_PTX[];

/* Fail the test unless `s` is DF_OK. */
void fx_ok(df_status s);
/* Fail the test unless `s` has `code` and its message contains `fragment`. */
void fx_fails(df_status s, df_code code, const char *fragment);

/* fake_reset() must have configured the fake already. Opens device 0 and
   loads FX_PTX. */
void fx_open(rt_fixture *f);
/* Destroy in reverse order; checks every fake allocation was freed. */
void fx_close(rt_fixture *f);

/* Pack `plan` (destroyed) into a runtime plan with `block_size`. */
df_rt_plan *fx_plan(df_rt *rt, df_plan *plan, uint32_t block_size);
/* The seed make_plan() (4 SMs, cluster 2, HBM comms) as a runtime plan. */
df_rt_plan *fx_seed_plan(df_rt *rt);
/* A 4-SM cluster-2 cluster_local plan with only cluster comms. */
df_rt_plan *fx_cluster_plan(df_rt *rt);
/* The seed attention program on 4 SMs (cluster 2), lengths 384 and 256
   at block 128, with an instruction pool (docs/pool.md); read from a blob
   with its program, so it re-plans. */
df_rt_plan *fx_pool_plan(df_rt *rt);

#endif
