/* Receives before the handler (REFERENCE 6 steps 2 and 3). */
#include "runtime.h"

/* Cluster receives: the leader waits each target barrier's phase (cluster
   records carry the phase in flag_epoch), then orders the async-proxy
   writes before every thread's generic reads. */
void df_rt_cluster_recv(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (df_rt_leader(rt)) {
    for (uint32_t i = 0; i < n; i++) {
      if (c[i].kind != DF_COMM_CLUSTER_RECV)
        continue;
      uint32_t b = df_comm_barrier(&c[i], df_rt_slot(rt, c[i].dst_slot_id));
      if (b == DF_SENTINEL)
        __builtin_trap(); /* packer invariant: cluster targets have barriers */
      df_rt_mark(rt, DF_PHASE_CLUSTER_RECV, df_rt_comm_index(rt, &c[i]), c[i].flag_epoch & 1);
      df_rt_bar_wait(rt, df_rt_bar_addr(rt, b), c[i].flag_epoch & 1, false);
    }
    /* CTA-scope wait, no proxy fence: the bulk copy's writes land in this
       CTA's shared memory and are visible to whoever observes the phase
       its complete_tx finished (as TMA consumers rely on); the barrier
       below carries that to the other threads. A cluster-scope acquire
       would invalidate L1 (the records the handler reads next), and a
       full fence.proxy.async cost ~0.2 us per edge (bench/overhead). */
    DF_RT_TRACE_AT(rt, DF_RT_TRACE_CL_WAIT);
  }
  df_ptx_bar_sync();
  DF_RT_TRACE_AT(rt, DF_RT_TRACE_CL_SYNC);
}

/* Thread-copy path for one transfer c[0..g): the leader alone
   acquire-polls each segment's flag (in segment order) while the other
   threads wait at a block barrier, which carries its acquire to them;
   then every thread copies staging -> target (nothing to copy for a
   direct-global target aliasing the staging bytes). The leader then
   arrives once on the receive barrier, so the barrier's phases advance
   exactly as when the bulk path or a cluster send completes them. */
/* Leader: the transfer's progress mark, then its flag poll. */
static void leader_poll(const df_rt *rt, const df_abi_comm *c, const df_abi_slot *dst) {
  if (!df_rt_leader(rt))
    return;
  df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, c), c->flag_epoch);
  df_rt_poll_flag(rt, df_comm_flag(c, dst), c->flag_epoch);
}

/* Leader: one arrival on receive barrier b, if the target has one. */
static void leader_arrive(const df_rt *rt, uint32_t b) {
  if (df_rt_leader(rt) && b != DF_SENTINEL)
    df_ptx_mbar_arrive(df_rt_bar_addr(rt, b));
}

static void recv_copy(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  if (g == 1) {
    /* One segment (the common case): its records are read before the
       poll, whose acquire empties L1 (SASS CCTL.IVALL); read after it,
       they cost two dependent L2 round trips before the copy could start
       (bench/overhead trace). */
    const df_abi_slot *src = df_rt_slot(rt, c->src_slot_id);
    const df_abi_slot *dst = df_rt_slot(rt, c->dst_slot_id);
    const uint32_t off = c->byte_offset, bytes = df_comm_bytes(c, src, dst);
    uint8_t *to = df_rt_slot_ptr(rt, dst) + off;
    const uint8_t *from = rt->staging + dst->global_offset + off;
    const uint32_t b = df_comm_barrier(c, dst);
    if (rt->threads >= 32 && bytes <= 32u * 16u &&
        (((uintptr_t)to | (uintptr_t)from | bytes) & 15u) == 0) {
      /* One 16-byte vector per lane at most: warp 0 alone polls (leader),
         syncs (bar.warp.sync carries the acquire to its lanes) and copies;
         the block barrier that ends the receive phase (df_rt_hbm_recv)
         publishes the bytes. One block barrier fewer per edge. */
      if (rt->tid < 32) {
        leader_poll(rt, c, dst);
        df_ptx_warp_sync();
        if (to != from && rt->tid < bytes / 16u)
          ((df_v4u32 *)to)[rt->tid] = ((const df_v4u32 *)from)[rt->tid];
        df_ptx_warp_sync();
        leader_arrive(rt, b);
      }
      return;
    }
    leader_poll(rt, c, dst);
    df_ptx_bar_sync();
    df_rt_copy(rt, to, from, bytes);
    leader_arrive(rt, b);
    return;
  }
  if (df_rt_leader(rt))
    for (uint32_t j = 0; j < g; j++)
      leader_poll(rt, &c[j], df_rt_slot(rt, c[j].dst_slot_id));
  df_ptx_bar_sync();
  for (uint32_t j = 0; j < g; j++) {
    const df_abi_slot *src = df_rt_slot(rt, c[j].src_slot_id);
    const df_abi_slot *dst = df_rt_slot(rt, c[j].dst_slot_id);
    uint32_t off = c[j].byte_offset;
    df_rt_copy(rt, df_rt_slot_ptr(rt, dst) + off, rt->staging + dst->global_offset + off,
               df_comm_bytes(&c[j], src, dst));
  }
  leader_arrive(rt, df_comm_barrier(c, df_rt_slot(rt, c->dst_slot_id)));
}

/* Bulk path, leader: a tiled transfer tile by tile, else post unless an
   earlier kind-6 issue did; wait for the (last) phase, clear the issued
   bit. */
static void recv_bulk(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  uint32_t b = df_comm_barrier(c, df_rt_slot(rt, c->dst_slot_id));
  if (g > 1) {
    df_rt_hbm_bulk_tiled(rt, c, g);
  } else if (!df_rt_bit(rt, rt->issued_bits, b)) {
    df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, &c[g - 1]), c[g - 1].flag_epoch);
    df_rt_hbm_bulk_post(rt, c, g, true);
  }
  df_rt_mark(rt, DF_PHASE_HBM_BULK, df_rt_comm_index(rt, c), c->barrier_phase & 1);
  df_rt_bar_wait(rt, df_rt_bar_addr(rt, b), c->barrier_phase & 1, false);
  df_rt_bit_put(rt, rt->issued_bits, b, false);
}

/* Whether c[i] is a receive or wait (kinds 4, 7) at the head of its
   transfer, i.e. a record this phase handles. */
static bool recv_head(const df_abi_comm *c) {
  return df_comm_recv_head(c->kind, c->segment_count, c->segment_id);
}

/* Whether c[i] (a receive head of g records) belongs to the batch: one
   segment, thread-copy path. */
static bool batched(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  return c->segment_count <= 1 && !df_rt_hbm_bulk_ok(rt, c, g);
}

/* A batched transfer as 16-byte vectors: target, source, count (0: none,
   or a direct-global target that aliases its staging bytes). */
typedef uint32_t df_v4 __attribute__((ext_vector_type(4)));
typedef struct df_vecs {
  df_v4 *dst;
  const df_v4 *src;
  uint32_t count;
} df_vecs;

/* The next batched transfer from c[*i] on that the vector copy can take,
   advancing *i past it; one whose ends or length are not 16-byte
   multiples is copied on the way by the plain cooperative copy. */
static df_vecs next_vecs(const df_rt *rt, const df_abi_comm *c, uint32_t n, uint32_t *i) {
  df_vecs r = {0, 0, 0};
  for (; *i < n; ++*i) {
    const df_abi_comm *t = &c[*i];
    if (!recv_head(t) || !batched(rt, t, df_comm_group(t, *i, n)))
      continue;
    const df_abi_slot *src = df_rt_slot(rt, t->src_slot_id);
    const df_abi_slot *dst = df_rt_slot(rt, t->dst_slot_id);
    uint32_t off = t->byte_offset, bytes = df_comm_bytes(t, src, dst);
    uint8_t *d = df_rt_slot_ptr(rt, dst) + off;
    const uint8_t *s = rt->staging + dst->global_offset + off;
    if (d == s || !bytes)
      continue;
    if ((((uintptr_t)d | (uintptr_t)s | bytes) & 15u) != 0) {
      df_rt_copy(rt, d, s, bytes);
      continue;
    }
    r.dst = (df_v4 *)d;
    r.src = (const df_v4 *)s;
    r.count = bytes / 16;
    ++*i;
    return r;
  }
  return r;
}

/* The batch's copies, four transfers at a time: every thread loads its
   vector of each of them before storing any, so their loads are in
   flight together (one round trip for a reduce's inputs of up to
   threads x 16 bytes each, instead of one round trip per input). */
static void batch_copy(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  uint32_t i = 0;
  for (;;) {
    df_vecs t0 = next_vecs(rt, c, n, &i), t1 = next_vecs(rt, c, n, &i);
    df_vecs t2 = next_vecs(rt, c, n, &i), t3 = next_vecs(rt, c, n, &i);
    if (!t0.count)
      return;
    uint32_t most = t0.count;
    most = t1.count > most ? t1.count : most;
    most = t2.count > most ? t2.count : most;
    most = t3.count > most ? t3.count : most;
    for (uint32_t v = rt->tid; v < most; v += rt->threads) {
      df_v4 x0 = {0, 0, 0, 0}, x1 = x0, x2 = x0, x3 = x0;
      if (v < t0.count)
        x0 = t0.src[v];
      if (v < t1.count)
        x1 = t1.src[v];
      if (v < t2.count)
        x2 = t2.src[v];
      if (v < t3.count)
        x3 = t3.src[v];
      if (v < t0.count)
        t0.dst[v] = x0;
      if (v < t1.count)
        t1.dst[v] = x1;
      if (v < t2.count)
        t2.dst[v] = x2;
      if (v < t3.count)
        t3.dst[v] = x3;
    }
  }
}

/* The batch through a table of its transfers in shared memory, when it
   has at most DF_RECV_TABLE members and every transfer
   is whole 16-byte vectors (16 x 24 bytes of static shared memory):
   lane j of the first warp reads the j-th member's records
   (comm, both slot records) before any poll, writes its transfer to the
   table and polls its flag. After the block barrier every thread copies
   from the table. recv_batch alone read the records again while copying,
   after the polls' acquires had emptied L1: an L2 round trip per record,
   one transfer after another (bench/attention timelines, run M). Returns
   false, the same in every thread and before any poll, when the batch
   does not fit. */
typedef struct df_recv_desc {
  df_v4 *dst;
  const df_v4 *src;
  uint32_t count;   /* 16-byte vectors; 0: nothing to copy */
  uint32_t barrier; /* the target's receive barrier, or DF_SENTINEL */
} df_recv_desc;
#define DF_RECV_TABLE 16u
static __attribute__((address_space(3))) df_recv_desc recv_table[DF_RECV_TABLE];
static __attribute__((address_space(3))) uint32_t recv_table_count;

/* Lane l of the first warp: the l-th batch member (or NULL) and the
   members' count. Up to 32 records, lane l tests record l (one round
   trip for all of them) and a ballot orders the members; more, every
   lane walks them all. */
static const df_abi_comm *table_member(const df_rt *rt, const df_abi_comm *c, uint32_t n,
                                       uint32_t lane, uint32_t *count) {
  if (n <= 32) {
    const bool member = lane < n && recv_head(&c[lane]) &&
                        batched(rt, &c[lane], df_comm_group(&c[lane], lane, n));
    uint32_t votes = __nvvm_vote_ballot_sync(0xffffffffu, member);
    *count = (uint32_t)__builtin_popcount(votes);
    for (uint32_t k = 0; k < lane && votes; k++)
      votes &= votes - 1; /* drop the members before the l-th */
    return votes ? &c[__builtin_ctz(votes)] : 0;
  }
  const df_abi_comm *mine = 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!recv_head(&c[i]) || !batched(rt, &c[i], df_comm_group(&c[i], i, n)))
      continue;
    if (k == lane)
      mine = &c[i];
    k++;
  }
  *count = k;
  return mine;
}

/* A/B build switch (make_runtime_bc.sh ... -DDF_RECV_TABLE_FLAT=0): the
   table's copies four transfers at a time, as before run R. */
#ifndef DF_RECV_TABLE_FLAT
#define DF_RECV_TABLE_FLAT 1
#endif

#if DF_RECV_TABLE_FLAT
/* The table's copies as one index space over every transfer's vectors,
   each thread's share issued as async copies into shared memory (no
   registers hold them), then one wait: a reduce's inputs (16 x 65
   vectors for 16 GQA partials) take one L2 round trip for all of them.
   Four transfers at a time through registers kept 65 threads busy per
   round trip for GQA partials, and those registers spilled 88 bytes in
   every attention kernel with HBM receives; loading more at once through
   registers spilled more (run R). A target outside shared memory (a
   scratch-backed slot) is copied through a register. */
static void table_copy(const df_rt *rt, uint32_t count) {
  uint32_t total = 0;
  for (uint32_t j = 0; j < count; j++)
    total += recv_table[j].count;
  /* f walks the flat index upward, so (j, first) only move forward */
  uint32_t j = 0, first = 0;
  for (uint32_t f = rt->tid; f < total; f += rt->threads) {
    while (f - first >= recv_table[j].count)
      first += recv_table[j++].count;
    df_v4 *to = recv_table[j].dst + (f - first);
    const df_v4 *from = recv_table[j].src + (f - first);
    if (df_ptx_is_shared(to))
      df_ptx_cp_async16((uint32_t)(uintptr_t)(__attribute__((address_space(3))) df_v4 *)to, from);
    else
      *to = *from;
  }
  df_ptx_cp_async_wait_all();
}
#endif

static bool recv_table_batch(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (rt->threads < 32)
    return false;
  if (rt->tid < 32) { /* the whole first warp: it votes */
    const uint32_t lane = rt->tid;
    uint32_t count;
    const df_abi_comm *mine = table_member(rt, c, n, lane, &count);
    bool ok = count <= DF_RECV_TABLE;
    df_recv_desc d = {0, 0, 0, DF_SENTINEL};
    uint32_t flag = 0;
    if (ok && mine) {
      const df_abi_slot *src = df_rt_slot(rt, mine->src_slot_id);
      const df_abi_slot *dst = df_rt_slot(rt, mine->dst_slot_id);
      const uint32_t off = mine->byte_offset, bytes = df_comm_bytes(mine, src, dst);
      uint8_t *to = df_rt_slot_ptr(rt, dst) + off;
      const uint8_t *from = rt->staging + dst->global_offset + off;
      d.barrier = df_comm_barrier(mine, dst);
      flag = df_comm_flag(mine, dst);
      if (to != from && bytes) {
        ok = (((uintptr_t)to | (uintptr_t)from | bytes) & 15u) == 0;
        d.dst = (df_v4 *)to;
        d.src = (const df_v4 *)from;
        d.count = bytes / 16;
      }
    }
    ok = __nvvm_vote_all_sync(0xffffffffu, ok);
    DF_RT_DIAG_AT(rt, DF_RT_DIAG_POLL);
    if (ok && mine) {
      recv_table[lane] = d;
      df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, mine), mine->flag_epoch);
      df_rt_poll_flag(rt, flag, mine->flag_epoch);
    }
    if (lane == 0)
      recv_table_count = ok ? count : DF_SENTINEL;
  }
  df_ptx_bar_sync();
  const uint32_t count = recv_table_count;
  if (count == DF_SENTINEL)
    return false;
#if DF_RECV_TABLE_FLAT
  table_copy(rt, count);
#else
  /* Four transfers at a time, every load before any store (batch_copy). */
  for (uint32_t j = 0; j < count; j += 4) {
    df_recv_desc t[4];
    uint32_t most = 0;
    for (uint32_t k = 0; k < 4; k++) {
      t[k] = j + k < count ? recv_table[j + k] : (df_recv_desc){0, 0, 0, DF_SENTINEL};
      most = t[k].count > most ? t[k].count : most;
    }
    for (uint32_t v = rt->tid; v < most; v += rt->threads) {
      df_v4 x[4];
      for (uint32_t k = 0; k < 4; k++)
        if (v < t[k].count)
          x[k] = t[k].src[v];
      for (uint32_t k = 0; k < 4; k++)
        if (v < t[k].count)
          t[k].dst[v] = x[k];
    }
  }
#endif
  DF_RT_DIAG_AT(rt, DF_RT_DIAG_COPY);
  if (df_rt_leader(rt))
    for (uint32_t j = 0; j < count; j++)
      if (recv_table[j].barrier != DF_SENTINEL)
        df_ptx_mbar_arrive(df_rt_bar_addr(rt, recv_table[j].barrier));
  return true;
}

/* The batch: an instruction's one-segment thread-copy receives, taken
   together. Their flags are polled in parallel, batch member b by lane
   b % L of the first warp (L = min(32, threads)), in rounds of L: each
   lane picks its member first and all of them then spin in one loop, so
   one warp-wide load polls every flag (divergent per-lane waits would
   run one after another until the warp reconverges). Inputs that are
   all there cost one round trip, and one that arrives late delays only
   itself. Each lane's acquire reaches the other threads through the
   block barrier that follows. Then all threads copy the batch
   (batch_copy) and the leader arrives once on each receive barrier, as
   recv_copy does. Arrival order changes nothing: the handler runs after
   the whole batch is present. */
static void recv_batch(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (recv_table_batch(rt, c, n))
    return;
  const uint32_t lanes = rt->threads < 32 ? rt->threads : 32;
  uint32_t count = 0;
  for (uint32_t base = 0;; base += lanes) {
    const df_abi_comm *mine = 0;
    count = 0;
    for (uint32_t i = 0; i < n; i++) {
      if (!recv_head(&c[i]) || !batched(rt, &c[i], df_comm_group(&c[i], i, n)))
        continue;
      if (rt->tid < lanes && count - base == rt->tid)
        mine = &c[i];
      count++;
    }
    if (mine) {
      df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, mine), mine->flag_epoch);
      df_rt_poll_flag(rt, df_comm_flag(mine, df_rt_slot(rt, mine->dst_slot_id)),
                      mine->flag_epoch);
    }
    if (count - base <= lanes)
      break;
  }
  if (!count)
    return;
  df_ptx_bar_sync();
  batch_copy(rt, c, n);
  if (df_rt_leader(rt))
    for (uint32_t i = 0; i < n; i++) {
      if (!recv_head(&c[i]) || !batched(rt, &c[i], df_comm_group(&c[i], i, n)))
        continue;
      uint32_t b = df_comm_barrier(&c[i], df_rt_slot(rt, c[i].dst_slot_id));
      if (b != DF_SENTINEL)
        df_ptx_mbar_arrive(df_rt_bar_addr(rt, b));
    }
}

/* Batches of at most this many receives keep the serial path; one
   receive alone always does. Run G (before the table) kept batches of up
   to 4 serial: batching them was no faster. With the table (run M) a
   reduce's 3 HBM receives of data already there take 4.5 instead of 5.6
   us (u1x128k's tree, the spinning-partial probe) and the attention
   cases are within 1 %, so every batch of 2 or more goes through it. A/B
   build switch: make_runtime_bc.sh ... -DDF_RECV_SERIAL_MAX=N. */
#ifndef DF_RECV_SERIAL_MAX
#define DF_RECV_SERIAL_MAX 1u
#endif

static uint32_t batch_size(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; i++)
    count += recv_head(&c[i]) && batched(rt, &c[i], df_comm_group(&c[i], i, n));
  return count;
}

/* HBM receives and waits (kinds 4, 7): an instruction with more than
   DF_RECV_SERIAL_MAX one-segment thread-copy receives takes them as one
   batch (recv_batch) first; the other transfers (bulk, segmented
   thread-copy, and the one-segment ones of a small batch) go one at a
   time. One block barrier at the end makes every target visible. */
void df_rt_hbm_recv(const df_rt *rt, const df_abi_comm *c, uint32_t n, const df_comm_scan *scan) {
  bool bulk = false;
  /* Every receive a batch member (the warp-wide scan read the records
     once): no walk over the records before the batch, nor after it. */
  const bool all = scan->recv_other == 0 && scan->recv_simple > DF_RECV_SERIAL_MAX;
  const bool batch = all || batch_size(rt, c, n) > DF_RECV_SERIAL_MAX;
  /* The loop ends at the last receive: records read after a poll (whose
     acquire empties L1) cost an L2 round trip each, and the comms after
     the receives (the sends) have nothing for it. */
  uint32_t end = 0;
  for (uint32_t i = 0; !all && i < n; i++)
    if (recv_head(&c[i]))
      end = i + 1;
  DF_RT_DIAG_AT(rt, DF_RT_DIAG_SCAN);
  if (batch)
    recv_batch(rt, c, n);
  for (uint32_t i = 0; i < end; i++) {
    if (!recv_head(&c[i]))
      continue;
    uint32_t g = df_comm_group(&c[i], i, n);
    if (df_rt_hbm_bulk_ok(rt, &c[i], g)) {
      bulk = true;
      if (df_rt_leader(rt))
        recv_bulk(rt, &c[i], g);
    } else if (!batch || c[i].segment_count > 1) {
      recv_copy(rt, &c[i], g);
    }
  }
  if (bulk && df_rt_leader(rt))
    df_ptx_fence_proxy_async_shared();
  df_ptx_bar_sync();
  DF_RT_TRACE_AT(rt, DF_RT_TRACE_HBM_DONE);
}
