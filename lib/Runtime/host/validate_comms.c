/* Checks of the comm records before running: kinds, instruction flag
   partitions, segment groups, peers, barrier / flag / ACK indices; and
   the pairing of every receive with its send. */
#include <stdio.h>

#include <string.h>

#include "host_internal.h"

uint32_t hb_group_len(const df_packed *k, uint32_t j) {
  const df_abi_comm *c = &k->comms[j];
  return c->segment_count > 1 && c->segment_id == 0 ? c->segment_count : 1;
}

static df_status bad(hb_run *r, uint32_t i, uint32_t j, const char *rule, uint32_t a,
                     uint32_t b) {
  char at[256];
  hb_describe_instr(r, i, at, sizeof at);
  const df_abi_comm *c = &r->k->comms[j];
  char msg[384];
  snprintf(msg, sizeof msg, rule, a, b);
  return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, j),
                 "%s: comm %u %s (slot %u -> %u): %s", at, j, hb_comm_kind_name(c->kind),
                 c->src_slot_id, c->dst_slot_id, msg);
}

static df_status check_partition(hb_run *r, uint32_t i) {
  const df_packed *k = r->k;
  const df_abi_instr *in = &k->instrs[i];
  uint32_t want_recv = in->flags & DF_INSTR_FLAGS_RECV_MASK;
  uint32_t want_send = in->flags >> DF_INSTR_FLAGS_SEND_SHIFT;
  uint32_t recv = 0, send = 0;
  for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++) {
    uint32_t kind = k->comms[j].kind;
    if (kind == DF_COMM_CLUSTER_RECV) {
      if (j - in->comm_offset != recv)
        return bad(r, i, j,
                   "cluster receives must come first in the comm block (the device takes "
                   "the first %u comms as its cluster receives), found one at block "
                   "position %u",
                   want_recv, j - in->comm_offset);
      recv++;
    } else if (kind == DF_COMM_CLUSTER_SEND || kind == DF_COMM_CLUSTER_RELEASE) {
      send++;
    }
  }
  if (recv != want_recv || send != want_send) {
    char at[256];
    hb_describe_instr(r, i, at, sizeof at);
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, HB_S),
                   "%s: instruction flags 0x%08x announce %u cluster receives and %u cluster "
                   "sends/releases, its comm block has %u and %u",
                   at, in->flags, want_recv, want_send, recv, send);
  }
  return df_status_ok();
}

static df_status check_group(hb_run *r, uint32_t i, uint32_t j, uint32_t end) {
  const df_packed *k = r->k;
  const df_abi_comm *c = &k->comms[j];
  if (c->segment_count == 0 || c->segment_id >= c->segment_count)
    return bad(r, i, j, "segment_id %u must be below segment_count %u (>= 1)", c->segment_id,
               c->segment_count);
  if (c->segment_count == 1)
    return df_status_ok();
  if (c->segment_id != 0)
    return bad(r, i, j,
               "segment %u of %u does not follow segment 0 of its transfer in the same comm "
               "block",
               c->segment_id, c->segment_count);
  if (j + c->segment_count > end)
    return bad(r, i, j, "a transfer of %u segments needs %u consecutive records here",
               c->segment_count, c->segment_count);
  for (uint32_t s = 1; s < c->segment_count; s++) {
    const df_abi_comm *d = &k->comms[j + s];
    if (d->kind != c->kind || d->src_slot_id != c->src_slot_id ||
        d->dst_slot_id != c->dst_slot_id || d->segment_count != c->segment_count ||
        d->segment_id != s)
      return bad(r, i, j + s,
                 "expected segment %u of %u of the transfer that starts one record earlier "
                 "(same kind and slots, consecutive segment ids)",
                 s, c->segment_count);
  }
  return df_status_ok();
}

static df_status check_comm(hb_run *r, uint32_t i, uint32_t j) {
  const df_packed *k = r->k;
  const df_launch_package *l = &r->pkg;
  const df_abi_comm *c = &k->comms[j];
  if (c->kind < DF_COMM_CLUSTER_SEND || c->kind > DF_COMM_HBM_RECV_WAIT)
    return bad(r, i, j, "unknown comm kind %u", c->kind, 0);
  if (df_comm_kind_is_cluster((df_comm_kind)c->kind)) {
    if (c->peer_cta_rank >= r->cluster_size)
      return bad(r, i, j, "peer_cta_rank %u is outside the cluster of %u CTAs", c->peer_cta_rank,
                 r->cluster_size);
    if (c->flag_index != HB_S && c->flag_index >= l->cluster_ack_count)
      return bad(r, i, j, "ACK index %u out of range (%u ACK barriers)", c->flag_index,
                 l->cluster_ack_count);
    if (c->kind == DF_COMM_CLUSTER_RELEASE) {
      if (c->flag_index == HB_S)
        return bad(r, i, j, "a cluster release needs an ACK index (flag_index)", 0, 0);
      return df_status_ok();
    }
    uint32_t b = hb_comm_barrier(k, c);
    if (b == HB_S || b >= l->barrier_count)
      return bad(r, i, j,
                 "a cluster transfer needs the destination slot's barrier, got %u "
                 "(%u barriers)",
                 b, l->barrier_count);
    return df_status_ok();
  }
  uint32_t f = hb_comm_flag(k, c);
  if (f == HB_S || f >= l->flag_count)
    return bad(r, i, j, "an HBM comm needs a flag (comm or destination slot), got %u (%u flags)",
               f, l->flag_count);
  bool bulk_recv = (c->kind == DF_COMM_HBM_RECV && r->bulk_hbm) ||
                   c->kind == DF_COMM_HBM_RECV_ISSUE || c->kind == DF_COMM_HBM_RECV_WAIT;
  if (bulk_recv && !hb_comm_signal_only(k, c)) {
    uint32_t b = hb_comm_barrier(k, c);
    if (b == HB_S || b >= l->barrier_count)
      return bad(r, i, j,
                 "a bulk-copy HBM receive completes on a barrier, got %u (%u barriers)", b,
                 l->barrier_count);
  }
  return df_status_ok();
}

/* The CTA a comm's data comes from (receive) or goes to (send). */
static uint32_t other_cta(const hb_run *r, uint32_t j) {
  uint32_t i = r->comm_instr[j];
  return i == HB_S ? HB_S : hb_peer_cta(r, r->instr_cta[i], &r->k->comms[j]);
}

static bool same_key(const df_abi_comm *a, const df_abi_comm *b) {
  return a->src_slot_id == b->src_slot_id && a->dst_slot_id == b->dst_slot_id &&
         a->segment_id == b->segment_id;
}

static bool pairs(const hb_run *r, uint32_t send, uint32_t recv) {
  const df_abi_comm *s = &r->k->comms[send], *v = &r->k->comms[recv];
  if (!same_key(s, v) || r->comm_instr[send] == HB_S)
    return false;
  if (s->kind == DF_COMM_CLUSTER_SEND)
    return v->kind == DF_COMM_CLUSTER_RECV && other_cta(r, send) == r->instr_cta[r->comm_instr[recv]] &&
           other_cta(r, recv) == r->instr_cta[r->comm_instr[send]];
  if (s->kind == DF_COMM_HBM_SEND)
    return (v->kind == DF_COMM_HBM_RECV || v->kind == DF_COMM_HBM_RECV_WAIT) &&
           s->flag_epoch == v->flag_epoch;
  return false;
}

/* Pair receives with sends (first unpaired in packed order) and HBM
   issues with their waits. Sends are bucketed by destination slot (part of
   the transfer key) so pairing stays linear on full-chip plans. */
static df_status match(hb_run *r) {
  const df_packed *k = r->k;
  uint32_t slots = k->slot_count;
  uint32_t *first = df_alloc(&r->al, sizeof(uint32_t) * ((uint64_t)slots + 1));
  uint32_t *sends = df_alloc(&r->al, sizeof(uint32_t) * (k->comm_count ? k->comm_count : 1));
  if (!first || !sends) {
    df_free(&r->al, first);
    df_free(&r->al, sends);
    return hb_oom("comm pairing");
  }
  memset(first, 0, sizeof(uint32_t) * ((uint64_t)slots + 1));
  for (uint32_t s = 0; s < k->comm_count; s++)
    if (k->comms[s].dst_slot_id < slots)
      first[k->comms[s].dst_slot_id + 1]++;
  for (uint32_t i = 0; i < slots; i++)
    first[i + 1] += first[i];
  for (uint32_t s = 0; s < k->comm_count; s++) {
    uint32_t d = k->comms[s].dst_slot_id;
    if (d < slots)
      sends[first[d]++] = s;
  }
  for (uint32_t i = slots; i > 0; i--) /* restore the bucket starts */
    first[i] = first[i - 1];
  first[0] = 0;
  for (uint32_t v = 0; v < k->comm_count; v++) {
    uint32_t kind = k->comms[v].kind, d = k->comms[v].dst_slot_id;
    if (r->comm_instr[v] == HB_S || d >= slots)
      continue;
    if (kind == DF_COMM_CLUSTER_RECV || kind == DF_COMM_HBM_RECV ||
        kind == DF_COMM_HBM_RECV_WAIT) {
      for (uint32_t x = first[d]; x < first[d + 1]; x++) {
        uint32_t s = sends[x];
        if (r->comm_match[s] == HB_S && pairs(r, s, v)) {
          r->comm_match[s] = v;
          r->comm_match[v] = s;
          break;
        }
      }
    }
  }
  df_free(&r->al, first);
  df_free(&r->al, sends);
  for (uint32_t v = 0; v < k->comm_count; v++) {
    const df_abi_comm *c = &k->comms[v];
    if (c->kind != DF_COMM_HBM_RECV_ISSUE || r->comm_instr[v] == HB_S)
      continue;
    uint32_t cta = r->instr_cta[r->comm_instr[v]];
    for (uint32_t w = 0; w < k->comm_count; w++) {
      const df_abi_comm *d = &k->comms[w];
      if (d->kind != DF_COMM_HBM_RECV_WAIT || r->comm_instr[w] == HB_S ||
          r->instr_cta[r->comm_instr[w]] != cta || !same_key(c, d) ||
          d->flag_epoch != c->flag_epoch)
        continue;
      bool taken = false;
      for (uint32_t u = 0; u < v && !taken; u++)
        taken = k->comms[u].kind == DF_COMM_HBM_RECV_ISSUE && r->comm_match[u] == w;
      if (!taken) {
        r->comm_match[v] = w;
        break;
      }
    }
  }
  return df_status_ok();
}

df_status hb_validate_comms(hb_run *r) {
  const df_packed *k = r->k;
  for (uint32_t i = 0; i < k->instr_count; i++) {
    const df_abi_instr *in = &k->instrs[i];
    if (in->opcode == DF_ABI_OP_EXIT || in->opcode == DF_ABI_OP_POOL)
      continue;
    uint32_t end = in->comm_offset + in->comm_count;
    for (uint32_t j = in->comm_offset; j < end; j++)
      DF_TRY(check_comm(r, i, j));
    DF_TRY(check_partition(r, i));
    for (uint32_t j = in->comm_offset; j < end; j += hb_group_len(k, j))
      DF_TRY(check_group(r, i, j, end));
  }
  DF_TRY(match(r));
  return df_status_ok();
}
