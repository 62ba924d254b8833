/* The table of df passes that df-opt exposes as --<name>="options". */
#include "df/compiler.h"
#include "pass_util.h"

df_status df_create_schedule_pass(const char *options, MlirPass *out);
df_status df_create_allocate_barriers_pass(const char *options, MlirPass *out);
df_status df_create_layout_slots_pass(const char *options, MlirPass *out);
df_status df_create_pack_pass(const char *options, MlirPass *out);
df_status df_create_select_variants_pass(const char *options, MlirPass *out);
df_status df_create_fuse_pass(const char *options, MlirPass *out);

static df_status create_verify(const char *options, MlirPass *out) {
  if (options && *options)
    return df_status_errorf(DF_EINVAL, "df-verify takes no options, got '%s'", options);
  *out = df_create_verify_pass();
  return df_status_ok();
}

static const df_pass_info table[] = {
    {"df-verify", "check every rule of the df dialect and the program model (always run first)",
     "", create_verify},
    {"df-schedule", "schedule the program onto SMs for concrete range lengths",
     "      sm-count=N cluster-size=N block-size=N range-lengths=axis:l,l[;axis:l]\n"
     "      task-extents=a[,b] policy=round_robin|cluster_local\n"
     "      reduce-strategy=all_at_once|streaming|streaming_tree|auto include-exit=BOOL\n"
     "      force-hbm-comms=BOOL partial-only=BOOL iter-range-buckets=auto|1,2,generic|off\n"
     "      iter-range-bucket-size=N iter-range-exact-lengths=l,l\n"
     "      transfer-tile-bytes=N (split transfers into segments of at most N bytes)\n"
     "      target=sm_90|sm_80 shared-memory-limit=BYTES (auto: first strategy that fits)\n"
     "      defer-reduces=BOOL balance-iters=BOOL (df extensions, all_at_once)\n"
     "      even-split=BOOL even-split-granularity=N even-split-chunks=N\n"
     "      even-split-task-cost=N (df extension, round_robin all_at_once: the total range,\n"
     "      plus N units per task, cut into even-split-chunks (default sm-count) even chunks)\n"
     "      even-split-taper=P even-split-taper-min=N (df extension, with even-split: batches\n"
     "      of even-split-chunks chunks, each taking P percent of the rest, down to chunks of N\n"
     "      units, default 512; for the pool: long pieces first, short ones last)\n"
     "      reduce-fan-in=N (df extension, all_at_once: reduce trees of at most N inputs)\n"
     "      reduce-spread=BOOL (df extension, with reduce-fan-in: each tree reduce on the first\n"
     "      SM under it that runs no other reduce of the task)\n"
     "      reduce-sms=N (df extension, round_robin all_at_once: the last N SMs run no ITER;\n"
     "      each task's last REDUCE and its FINALIZE run there, tasks in turn)\n"
     "      pool=BOOL (df extension, round_robin all_at_once, even-split allowed: every\n"
     "      instruction goes to one pool the CTAs claim from at run time in dependency order;\n"
     "      all transfers through HBM flags, direct-global slots; docs/pool.md)\n"
     "      skip-unary-reduce=BOOL (df extension, all_at_once: no REDUCE for a task of one\n"
     "      partial; its FINALIZE reads the partial)\n"
     "      block-size=auto (df extension, round_robin all_at_once: block size, balance-iters\n"
     "      and defer-reduces chosen by a cost model; docs/plan-core.md) split-step=N\n"
     "      split-min-block=N split-max-block=N split-unit-ns=X split-partial-ns=X\n"
     "      split-reduce-ns=X split-reduce-input-ns=X split-finalize-ns=X split-hbm-edge-ns=X\n"
     "      split-slot-bytes=N split-slot-budget=N\n",
     df_create_schedule_pass},
    {"df-select-variants", "choose each instruction's implementation by capability region",
     "      arch=sm_80|sm_90|sm_90a replace=OP=SYMBOL[:tiles=N,length=L,arity=A,dtype=T,\n"
     "      arch=X,general][;OP=SYMBOL...] (caller-supplied replacements)\n",
     df_create_select_variants_pass},
    {"df-fuse",
     "fuse instructions that run back to back on one CTA with no transfer between them "
     "(docs/fusion.md)",
     "      max-parts=N (2..8, default 8)\n"
     "      no-iter=BOOL (no ITER in a fused instruction; REDUCE -> FINALIZE still fuse)\n",
     df_create_fuse_pass},
    {"df-allocate-barriers", "annotate slots and comms with barrier indices and phases", "",
     df_create_allocate_barriers_pass},
    {"df-layout-slots", "lay out slots in shared and global memory (records its options)",
     "      hbm-direct-global=BOOL hbm-direct-global-slots=i,j reuse-hbm-flags=BOOL\n"
     "      per-cta-shared=BOOL (shared offsets per CTA: dynamic shared = largest CTA)\n"
     "      reuse-dead-shared=BOOL (with per-cta-shared: keys whose uses are ordered by\n"
     "        happens-before share bytes in a CTA)\n"
     "      target=sm_90|sm_80 shared-memory-limit=BYTES (refuse a CTA over it; 0 = off)\n",
     df_create_layout_slots_pass},
    {"df-pack", "pack the plan into ABI records held as constants (df.packed)", "",
     df_create_pack_pass},
    {NULL, NULL, NULL, NULL},
};

const df_pass_info *df_pass_table(void) { return table; }
