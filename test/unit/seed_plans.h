/* The seed programs of ../shared/seeds/test_dataflow_runtime.py built
   through the program API, and the seed schedule options. */
#ifndef DF_TEST_SEED_PLANS_H
#define DF_TEST_SEED_PLANS_H

#include "df/plan.h"

/* make_program(): partial(split_kv) -> reduce(combine) -> finalize. */
df_program *seed_attention_program(void);
/* make_reshared_program(): map1 -> reshared gather_up -> map2 -> finalize. */
df_program *seed_moe_program(void);

/* make_plan(): 4 SMs / cluster 2, kv [384,256], block 128, extents (2,).
   Caller destroys. Aborts the test on failure. */
df_plan *seed_make_plan(void);
/* make_reshared_plan(): 4/2, expert_tile [256], hidden_tile [256],
   extents (1,), no exit, force HBM. */
df_plan *seed_make_reshared_plan(void);

/* Schedule the attention program with kv lengths on a topology. */
df_plan *seed_schedule_attention(uint32_t sm_count, uint32_t cluster_size,
                                 const uint32_t *kv, uint32_t task_count,
                                 uint32_t block, df_policy policy,
                                 df_reduce_strategy strategy, bool include_exit);

#endif
