/* Run-time re-plans that repeat the compiled plan's choices (transfer
   tile, `auto` memory strategy, `auto` split) recorded in the program. */
#include <string.h>

#include "df/plan.h"

df_status df_schedule_replan(const df_program *g, const df_schedule_options *o,
                             const df_pack_options *po, df_plan **out, df_fit_result *fit) {
  if (!g || !o || !out)
    return df_status_errorf(DF_EINVAL, "re-plan: NULL argument");
  *out = NULL;
  df_schedule_options so = *o;
  if (!so.transfer_tile_bytes)
    so.transfer_tile_bytes = g->transfer_tile_bytes;
  if (g->split_auto) {
    /* block-size=auto: choose again for the new lengths (round_robin
       all_at_once, the placement chosen too, the default model) */
    so.auto_split = true;
    so.block_size = 0;
    so.policy = DF_POLICY_ROUND_ROBIN;
    so.strategy = DF_REDUCE_ALL_AT_ONCE;
    so.balance_iters = so.defer_reduces = so.even_split = false;
    so.split = df_split_search_default();
    return df_status_wrap(df_schedule(g, &so, out),
                          "re-plan with the recorded split choice block-size=auto");
  }
  if (!g->memory_auto)
    return df_schedule(g, &so, out);
  if (g->auto_policy != DF_POLICY_ROUND_ROBIN && g->auto_policy != DF_POLICY_CLUSTER_LOCAL)
    return df_status_errorf(DF_EINVAL,
                            "re-plan: program '%s' records auto_policy %u, not round_robin or "
                            "cluster_local",
                            g->name, g->auto_policy);
  so.policy = (df_policy)g->auto_policy;
  so.strategy = DF_REDUCE_ALL_AT_ONCE;
  df_fit_result local;
  df_status s = df_schedule_fitting(g, &so, po, g->shared_memory_limit, out, fit ? fit : &local);
  return df_status_wrap(s, "re-plan with the recorded memory choice auto");
}
