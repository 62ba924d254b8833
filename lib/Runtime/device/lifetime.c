/* Source lifetime of cluster sends (REFERENCE 6 step 1): a bulk copy reads
   its shared source asynchronously, so nothing may overwrite those bytes
   until the leader has waited for the reads. The packer's action (args
   word 14) says when; a plan whose source lifetime is not precomputed (a
   send from a scratch-backed slot: DF_FEATURE_SOURCE_TEST) also tests,
   where the action is 0, the source ranges still outstanding. */
#include "runtime.h"

/* A/B build switch (-DDF_RT_SOURCE_TEST_ALWAYS=1): the run-time test on
   every plan, as before run L. */
#ifndef DF_RT_SOURCE_TEST_ALWAYS
#define DF_RT_SOURCE_TEST_ALWAYS 0
#endif

static bool pending_overlap(const df_rt *rt, uint32_t slot_id) {
  if (slot_id == DF_SENTINEL)
    return false;
  const df_abi_slot *s = df_rt_slot(rt, slot_id);
  if (!df_slot_in_shared(s))
    return false;
  uint32_t lo = df_rt_slot_smem(rt, s);
  return lo < rt->pend_hi && rt->pend_lo < lo + s->bytes;
}

/* Whether the instruction writes (output slots of all its parts, receive
   targets) bytes a pending bulk send may still read. A fused instruction's
   part records follow its first (args word 15 = part count,
   docs/fusion.md). */
static bool writes_pending(const df_rt *rt, const df_abi_args *a, const df_abi_comm *c,
                           uint32_t n) {
  const uint32_t parts = a->reserved1 ? a->reserved1 : 1;
  for (uint32_t p = 0; p < parts; p++)
    if (pending_overlap(rt, a[p].output_slot))
      return true;
  const uint32_t recv = DF_KIND_BIT(DF_COMM_CLUSTER_RECV) | DF_KIND_BIT(DF_COMM_HBM_RECV) |
                        DF_KIND_BIT(DF_COMM_HBM_RECV_ISSUE) | DF_KIND_BIT(DF_COMM_HBM_RECV_WAIT);
  for (uint32_t i = 0; i < n; i++)
    if ((DF_KIND_BIT(c[i].kind & 31) & recv) && pending_overlap(rt, c[i].dst_slot_id))
      return true;
  return false;
}

void df_rt_source_guard(df_rt *rt, const df_abi_args *a, const df_abi_comm *c, uint32_t n) {
  if (!DF_HAS(DF_FEATURE_CLUSTER_SEND) || rt->pend_lo >= rt->pend_hi)
    return; /* no bulk send outstanding */
  uint32_t action = a->reserved0;
  if (action == DF_SOURCE_WAIT_NONE) {
    /* Precomputed source lifetime (REFERENCE 5.5): 0 means the packer
       found no write over a pending source. The run-time test cost
       0.23 us per cluster edge (bench/overhead, run L). */
    if (!(DF_HAS(DF_FEATURE_SOURCE_TEST) || DF_RT_SOURCE_TEST_ALWAYS) ||
        !writes_pending(rt, a, c, n))
      return;
    action = DF_SOURCE_WAIT_ALL;
  }
  bool keep = action == DF_SOURCE_WAIT_KEEP_NEWEST;
  df_rt_mark(rt, DF_PHASE_SOURCE_GUARD, DF_PROGRESS_NONE, action);
  if (df_rt_leader(rt)) {
    if (keep)
      df_ptx_bulk_wait_read_but_newest();
    else
      df_ptx_bulk_wait_read_all();
  }
  rt->pend_lo = keep ? rt->new_lo : UINT32_MAX;
  rt->pend_hi = keep ? rt->new_hi : 0;
  if (!keep) {
    rt->new_lo = UINT32_MAX;
    rt->new_hi = 0;
  }
  df_ptx_bar_sync();
}

/* After an instruction's cluster sends (one committed group): its source
   ranges become the newest group, joined into the outstanding range. */
void df_rt_track_sends(df_rt *rt, const df_abi_comm *c, uint32_t n) {
  uint32_t lo = UINT32_MAX, hi = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (c[i].kind != DF_COMM_CLUSTER_SEND)
      continue;
    const df_abi_slot *s = df_rt_slot(rt, c[i].src_slot_id);
    uint32_t b = df_rt_slot_smem(rt, s) + c[i].byte_offset;
    uint32_t e = b + df_comm_bytes(&c[i], s, df_rt_slot(rt, c[i].dst_slot_id));
    lo = b < lo ? b : lo;
    hi = e > hi ? e : hi;
  }
  if (lo >= hi)
    return;
  rt->new_lo = lo;
  rt->new_hi = hi;
  rt->pend_lo = lo < rt->pend_lo ? lo : rt->pend_lo;
  rt->pend_hi = hi > rt->pend_hi ? hi : rt->pend_hi;
}
