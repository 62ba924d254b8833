/* HBM transfers through global staging and flags. A send copies the
   source slot to staging at the destination slot's global offset (plus
   byte offset) and stores flags[f] = epoch (release); a receive waits
   until flags[f] >= epoch (acquire) and copies staging into the
   destination slot. Segmented plans use the bulk path: the send stores
   the last segment's flag and the receive polls it; a segmented (tiled)
   transfer into a bulk-capable target is then loaded tile by tile, each
   tile one phase of the receiver's barrier, an odd number of phases in
   all (the device's protocol, lib/Runtime/device/hbm_bulk.c), so at most
   one tile is in flight. HBM_RECV_ISSUE of an unsegmented transfer
   copies early when the flag is already there and HBM_RECV_WAIT
   completes it; a tiled transfer's issue does nothing. Direct-global
   ends with one global offset move no bytes (signal-only). */
#include <stdio.h>

#include "host_internal.h"

/* The send that feeds comm v (a receive, wait or issue), or S. */
static uint32_t send_of(const hb_run *r, uint32_t v) {
  if (r->k->comms[v].kind == DF_COMM_HBM_RECV_ISSUE)
    v = r->comm_match[v];
  return v == HB_S ? HB_S : r->comm_match[v];
}

/* The receive passes on flags[f] >= epoch: the flag must have been
   stored in this launch, by (or after) each segment's own send. */
static df_status check_pass(hb_run *r, uint32_t j, uint32_t n, uint32_t f) {
  uint32_t instr = r->comm_instr[j];
  char at[256];
  hb_describe_instr(r, instr, at, sizeof at);
  if (!r->flag_set[f])
    return hb_fail(r, DF_HOST_DIAG_STALE_FLAG, hb_site_at(r, instr, j),
                   "%s: comm %u %s passes on flag %u = %u, a value left by a previous launch "
                   "(no send of this launch stored it; the launch package does not reset flags)",
                   at, j, hb_comm_kind_name(r->k->comms[j].kind), f, r->flags[f]);
  for (uint32_t g = 0; g < n; g++) {
    uint32_t s = send_of(r, j + g);
    if (s != HB_S && r->comm_done[s])
      continue;
    char who[160];
    if (s == HB_S)
      snprintf(who, sizeof who, "no hbm_send of this transfer (slot %u -> %u, segment %u, epoch "
                                "%u) exists",
               r->k->comms[j + g].src_slot_id, r->k->comms[j + g].dst_slot_id,
               r->k->comms[j + g].segment_id, r->k->comms[j + g].flag_epoch);
    else
      snprintf(who, sizeof who, "its own hbm_send (comm %u on CTA %u) has not run", s,
               r->instr_cta[r->comm_instr[s]]);
    return hb_fail(r, DF_HOST_DIAG_STALE_FLAG, hb_site_at(r, instr, j + g),
                   "%s: comm %u %s passes on flag %u = %u >= epoch %u stored by CTA %u (packed "
                   "instruction %u), but %s: the flag is shared with another transfer",
                   at, j + g, hb_comm_kind_name(r->k->comms[j + g].kind), f, r->flags[f],
                   r->k->comms[j + n - 1].flag_epoch, r->flag_set_cta[f], r->flag_set_instr[f],
                   who);
  }
  return df_status_ok();
}

/* Copy the group's segments from staging into the destination slot (a
   signal-only receive copies nothing but the bytes now hold its slot). */
static void copy_in(hb_run *r, uint32_t cta, uint32_t j, uint32_t n) {
  const df_packed *k = r->k;
  for (uint32_t g = 0; g < n; g++) {
    const df_abi_comm *m = &k->comms[j + g];
    uint32_t off, len = hb_comm_span(k, m, &off);
    uint32_t goff = k->slots[m->dst_slot_id].global_offset + off;
    hb_copy(r, hb_slot_region(r, cta, m->dst_slot_id, off, len), hb_staging_region(goff, len),
            m->dst_slot_id, r->comm_instr[j + g]);
  }
}

static df_status finish(hb_run *r, hb_cta *c, uint32_t j, uint32_t n, uint32_t peer) {
  for (uint32_t g = 0; g < n; g++) {
    r->comm_done[j + g] = 1;
    hb_delivery_consume(r, j + g);
    hb_cost_comm(r, c, j + g);
    DF_TRY(hb_log_comm(r, c, j + g, peer));
  }
  return df_status_ok();
}

/* Every receive with a barrier completes and consumes one phase, the
   default thread-copy path included (the device's leader arrives on the
   barrier there too), because phases are assigned over the cluster and
   HBM uses of a barrier together (REFERENCE 3.7). */
static bool uses_barrier(const hb_run *r, const df_abi_comm *m) {
  return !hb_comm_signal_only(r->k, m) && hb_comm_barrier(r->k, m) != HB_S;
}

/* Whether the device takes the bulk path for the group j..j+n (as
   df_rt_hbm_bulk_ok): kinds 6/7 or segments, a barrier, a target in
   shared memory and 16-byte granules. */
static bool bulk_ok(const hb_run *r, uint32_t j, uint32_t n) {
  const df_packed *k = r->k;
  const df_abi_comm *m = &k->comms[j];
  if (!r->bulk_hbm || !uses_barrier(r, m) ||
      (m->kind != DF_COMM_HBM_RECV_ISSUE && m->kind != DF_COMM_HBM_RECV_WAIT && n <= 1))
    return false;
  for (uint32_t g = 0; g < n; g++) {
    const df_abi_comm *s = &k->comms[j + g];
    const df_abi_slot *d = &k->slots[s->dst_slot_id];
    uint32_t off, len = hb_comm_span(k, s, &off);
    uint32_t smem = (d->flags & DF_SLOT_FLAG_SCRATCH_BACKED) ? d->reserved : d->shared_offset;
    if ((d->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) ||
        ((smem | d->global_offset | off | len) & 15u))
      return false;
  }
  return true;
}

/* A bulk load of `bytes` is posted while the issued ones are in flight. */
static void post_load(hb_cta *c, uint32_t bytes) {
  uint32_t now = c->recv_inflight + bytes;
  if (now > c->cost.max_recv_inflight_bytes)
    c->cost.max_recv_inflight_bytes = now;
}

static uint32_t group_bytes(const hb_run *r, uint32_t j, uint32_t n) {
  uint32_t t = 0;
  for (uint32_t g = 0; g < n; g++)
    t += r->comm_bytes[j + g];
  return t;
}

/* A tiled receive, tile by tile: segment g completes and is consumed as
   phase g of the transfer, parity (p + g) & 1; an even count adds one
   empty phase, so the transfer's last phase has the planned parity p. */
static df_status tiled_phases(hb_run *r, hb_cta *c, uint32_t j, uint32_t n, uint32_t f) {
  const df_abi_comm *m = &r->k->comms[j];
  uint32_t b = hb_comm_barrier(r->k, m), p = m->barrier_phase & 1u;
  for (uint32_t g = 0; g < (n | 1u); g++) {
    if (g < n)
      post_load(c, r->comm_bytes[j + g]);
    uint32_t at = j + (g < n ? g : n - 1);
    DF_TRY(hb_barrier_complete(r, c->id, b, r->flag_set_cta[f], r->flag_set_instr[f], at));
    bool passed;
    DF_TRY(hb_barrier_consume(r, c, b, (p + g) & 1u, at, &passed));
  }
  return df_status_ok();
}

/* Complete and consume the receiver's barrier phase of a receive. */
static df_status bulk_phase(hb_run *r, hb_cta *c, uint32_t j, uint32_t f) {
  const df_abi_comm *m = &r->k->comms[j];
  uint32_t b = hb_comm_barrier(r->k, m);
  DF_TRY(hb_barrier_complete(r, c->id, b, r->flag_set_cta[f], r->flag_set_instr[f], j));
  bool passed;
  DF_TRY(hb_barrier_consume(r, c, b, m->barrier_phase & 1u, j, &passed));
  return df_status_ok();
}

df_status hb_hbm_recv(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res) {
  const df_packed *k = r->k;
  const df_abi_comm *m = &k->comms[j];
  uint32_t n = hb_group_len(k, j), instr = r->comm_instr[j];
  *res = HB_STEP_PROGRESS;
  if (m->kind == DF_COMM_HBM_RECV_WAIT && uses_barrier(r, m)) {
    uint32_t b = hb_comm_barrier(k, m);
    hb_issue *is = &c->issues[b];
    if (is->issued && r->comm_match[is->comm] == j) {
      bool passed;
      DF_TRY(hb_barrier_consume(r, c, b, m->barrier_phase & 1u, j, &passed));
      is->issued = false;
      c->recv_inflight -= is->bytes;
      hb_cost_edge(r, c, is->set_instr, false);
      return finish(r, c, j, n, is->set_cta);
    }
  }
  const df_abi_comm *last = &k->comms[j + n - 1];
  uint32_t f = hb_comm_flag(k, last), e = last->flag_epoch;
  if (r->flags[f] < e) {
    hb_block(c, DF_HOST_WAIT_FLAG, instr, j, m->dst_slot_id, f, e, r->flags[f], r);
    *res = HB_STEP_BLOCKED;
    return df_status_ok();
  }
  DF_TRY(check_pass(r, j, n, f));
  copy_in(r, c->id, j, n);
  bool bulk = bulk_ok(r, j, n);
  if (bulk && n > 1) {
    DF_TRY(tiled_phases(r, c, j, n, f));
  } else if (uses_barrier(r, m)) {
    if (bulk)
      post_load(c, group_bytes(r, j, n));
    DF_TRY(bulk_phase(r, c, j, f));
  }
  hb_cost_edge(r, c, r->flag_set_instr[f], false);
  return finish(r, c, j, n, r->flag_set_cta[f]);
}

df_status hb_hbm_issue(hb_run *r, hb_cta *c, uint32_t j) {
  const df_packed *k = r->k;
  const df_abi_comm *m = &k->comms[j];
  uint32_t n = hb_group_len(k, j), instr = r->comm_instr[j];
  const df_abi_comm *last = &k->comms[j + n - 1];
  uint32_t f = hb_comm_flag(k, last), e = last->flag_epoch;
  if (hb_comm_signal_only(k, m))
    return df_status_ok(); /* issue = no-op for direct-global; the wait signals */
  if (n > 1)
    return df_status_ok(); /* tiled: the wait loads it tile by tile */
  uint32_t b = hb_comm_barrier(k, m);
  hb_issue *is = &c->issues[b];
  if (is->issued || r->flags[f] < e)
    return df_status_ok(); /* non-blocking: the wait completes it */
  DF_TRY(check_pass(r, j, n, f));
  for (uint32_t g = 0; g < n; g++) {
    uint32_t wait = r->comm_match[j + g];
    if (wait == HB_S) {
      char at[256];
      hb_describe_instr(r, instr, at, sizeof at);
      return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, instr, j + g),
                     "%s: comm %u hbm_recv_issue (slot %u -> %u) has no matching "
                     "hbm_recv_wait in CTA %u's queue",
                     at, j + g, m->src_slot_id, m->dst_slot_id, c->id);
    }
    uint32_t off, len = hb_comm_span(k, &k->comms[j + g], &off);
    DF_TRY(hb_check_landing(r, c->id, j + g, c->id, wait,
                            hb_slot_region(r, c->id, m->dst_slot_id, off, len)));
  }
  copy_in(r, c->id, j, n);
  DF_TRY(hb_barrier_complete(r, c->id, b, r->flag_set_cta[f], r->flag_set_instr[f], j));
  is->issued = true;
  is->comm = j;
  is->set_cta = r->flag_set_cta[f];
  is->set_instr = r->flag_set_instr[f];
  is->bytes = bulk_ok(r, j, n) ? group_bytes(r, j, n) : 0;
  post_load(c, is->bytes);
  c->recv_inflight += is->bytes;
  for (uint32_t g = 0; g < n; g++)
    hb_delivery_consume(r, r->comm_match[j + g]);
  return finish(r, c, j, n, r->flag_set_cta[f]);
}

df_status hb_hbm_send(hb_run *r, hb_cta *c, uint32_t j) {
  const df_packed *k = r->k;
  const df_abi_comm *m = &k->comms[j];
  uint32_t n = hb_group_len(k, j), instr = r->comm_instr[j];
  for (uint32_t g = 0; g < n; g++) {
    const df_abi_comm *s = &k->comms[j + g];
    uint32_t off, len = hb_comm_span(k, s, &off);
    uint32_t goff = k->slots[m->dst_slot_id].global_offset + off;
    DF_TRY(hb_delivery_check(r, c->id, j + g, goff, len));
    hb_copy(r, hb_staging_region(goff, len), hb_slot_region(r, c->id, m->src_slot_id, off, len),
            m->dst_slot_id, instr);
    DF_TRY(hb_delivery_add(r, c->id, j + g, r->comm_match[j + g], goff, len));
  }
  const df_abi_comm *last = &k->comms[j + n - 1];
  uint32_t f = hb_comm_flag(k, last);
  r->flags[f] = last->flag_epoch; /* st.release.gpu */
  r->flag_set[f] = 1;
  r->flag_set_cta[f] = c->id;
  r->flag_set_instr[f] = instr;
  uint32_t recv = r->comm_match[j];
  uint32_t peer = recv != HB_S && r->comm_instr[recv] != HB_S ? r->instr_cta[r->comm_instr[recv]]
                                                               : HB_S;
  return finish(r, c, j, n, peer);
}
