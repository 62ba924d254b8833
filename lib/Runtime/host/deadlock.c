/* Deadlock reports: for every blocked CTA its instruction, comm, slot,
   barrier/flag/ACK and the awaited parity/epoch, the CTA that would
   unblock it, and the wait-for cycle when there is one. */
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

static uint32_t cta_of_comm(const hb_run *r, uint32_t j) {
  return r->comm_instr[j] == HB_S ? HB_S : r->instr_cta[r->comm_instr[j]];
}

static uint32_t flag_sender(const hb_run *r, const df_host_wait *w) {
  const df_packed *k = r->k;
  uint32_t s = r->comm_match[w->comm];
  if (s != HB_S && !r->comm_done[s])
    return cta_of_comm(r, s);
  for (uint32_t j = 0; j < k->comm_count; j++) {
    const df_abi_comm *c = &k->comms[j];
    if (c->kind == DF_COMM_HBM_SEND && !r->comm_done[j] && r->comm_instr[j] != HB_S &&
        hb_comm_flag(k, c) == w->index && c->flag_epoch >= w->awaited)
      return cta_of_comm(r, j);
  }
  return HB_S;
}

static uint32_t releaser(const hb_run *r, const df_host_wait *w) {
  const df_packed *k = r->k;
  for (uint32_t j = 0; j < k->comm_count; j++) {
    const df_abi_comm *c = &k->comms[j];
    uint32_t from = cta_of_comm(r, j);
    if (c->kind == DF_COMM_CLUSTER_RELEASE && !r->comm_done[j] && from != HB_S &&
        c->flag_index == w->index && hb_peer_cta(r, from, c) == w->cta)
      return from;
  }
  return HB_S;
}

static uint32_t waits_for(const hb_run *r, const df_host_wait *w) {
  switch (w->kind) {
  case DF_HOST_WAIT_BARRIER: {
    uint32_t s = r->comm_match[w->comm];
    return s != HB_S && !r->comm_done[s] ? cta_of_comm(r, s) : HB_S;
  }
  case DF_HOST_WAIT_FLAG: return flag_sender(r, w);
  case DF_HOST_WAIT_ACK: return releaser(r, w);
  case DF_HOST_WAIT_CLUSTER: {
    uint32_t base = w->index * r->cluster_size;
    for (uint32_t m = base; m < base + r->cluster_size; m++)
      if (r->ctas[m].sync_count < w->awaited)
        return m;
    return HB_S;
  }
  }
  return HB_S;
}

static void describe_wait(hb_text *t, const hb_run *r, const df_host_wait *w) {
  const df_packed *k = r->k;
  const char *kind = w->comm != HB_S ? hb_comm_kind_name(k->comms[w->comm].kind) : "";
  switch (w->kind) {
  case DF_HOST_WAIT_BARRIER:
    hb_text_printf(t, "comm %u %s into slot %u waits on barrier %u for parity %u (%u phases "
                      "completed)",
                   w->comm, kind, w->slot, w->index, w->awaited, w->current);
    break;
  case DF_HOST_WAIT_FLAG:
    hb_text_printf(t, "comm %u %s into slot %u waits for flag %u >= epoch %u (flag is %u)",
                   w->comm, kind, w->slot, w->index, w->awaited, w->current);
    break;
  case DF_HOST_WAIT_ACK:
    if (w->comm != HB_S)
      hb_text_printf(t, "comm %u %s into gated slot %u waits on ACK barrier %u for release #%u "
                        "(%u arrived)",
                     w->comm, kind, w->slot, w->index, w->awaited, w->current);
    else
      hb_text_printf(t, "kernel exit waits on ACK barrier %u for the release of its cluster send "
                        "(%u of %u arrived)",
                     w->index, w->current, w->awaited + 1);
    break;
  case DF_HOST_WAIT_CLUSTER:
    hb_text_printf(t, "cluster_sync waits for every CTA of cluster %u to reach cluster sync #%u "
                      "(slowest has reached %u)",
                   w->index, w->awaited, w->current);
    break;
  }
}

static void describe_unblocker(hb_text *t, const hb_run *r, const df_host_wait *w) {
  if (w->waits_for == HB_S) {
    hb_text_printf(t, "; no unfinished CTA will ever unblock it");
    if (w->kind == DF_HOST_WAIT_BARRIER || w->kind == DF_HOST_WAIT_FLAG) {
      uint32_t s = r->comm_match[w->comm];
      if (s == HB_S)
        hb_text_printf(t, " (no matching send exists)");
      else
        hb_text_printf(t, " (its send, comm %u on CTA %u, already ran)", s, cta_of_comm(r, s));
    }
    return;
  }
  const hb_cta *o = &r->ctas[w->waits_for];
  if (o->phase == HB_PH_DONE)
    hb_text_printf(t, "; would be unblocked by CTA %u, which has finished", w->waits_for);
  else
    hb_text_printf(t, "; would be unblocked by CTA %u, itself blocked at queue position %u",
                   w->waits_for, o->wait.queue_pos);
}

/* First wait-for cycle among blocked CTAs (walk order = CTA order). */
static uint32_t find_cycle(const hb_run *r, uint32_t *mark, uint32_t *cycle) {
  for (uint32_t s = 0; s < r->cta_count; s++) {
    uint32_t cur = s;
    while (cur != HB_S && r->ctas[cur].blocked && r->ctas[cur].phase != HB_PH_DONE &&
           mark[cur] == 0) {
      mark[cur] = s + 1;
      cur = r->ctas[cur].wait.waits_for;
    }
    if (cur == HB_S || mark[cur] != s + 1)
      continue;
    uint32_t n = 0, at = cur;
    do {
      cycle[n++] = at;
      at = r->ctas[at].wait.waits_for;
    } while (at != cur);
    return n;
  }
  return 0;
}

static void write_report(hb_text *t, hb_run *r, uint32_t blocked, const uint32_t *cycle,
                         uint32_t cycle_len) {
  hb_text_printf(t, "deadlock: %u of %u CTAs blocked and none can make progress\n", blocked,
                 r->cta_count);
  for (uint32_t s = 0; s < r->cta_count; s++) {
    const hb_cta *c = &r->ctas[s];
    if (c->phase == HB_PH_DONE)
      continue;
    char at[256];
    if (c->wait.instr != HB_S)
      hb_describe_instr(r, c->wait.instr, at, sizeof at);
    else
      snprintf(at, sizeof at, "CTA %u at the end of its queue", s);
    hb_text_printf(t, "  %s: ", at);
    describe_wait(t, r, &c->wait);
    describe_unblocker(t, r, &c->wait);
    hb_text_printf(t, "\n");
  }
  if (cycle_len) {
    hb_text_printf(t, "wait-for cycle:");
    for (uint32_t i = 0; i < cycle_len; i++)
      hb_text_printf(t, " CTA %u ->", cycle[i]);
    hb_text_printf(t, " CTA %u\n", cycle[0]);
  } else {
    hb_text_printf(t, "no wait-for cycle: a chain of waits ends at a transfer, release or "
                      "cluster sync that no unfinished CTA will perform\n");
  }
}

df_status hb_deadlock(hb_run *r) {
  df_host_diag *d = &r->out->diag;
  uint32_t n = r->cta_count, blocked = 0;
  for (uint32_t s = 0; s < n; s++) {
    hb_cta *c = &r->ctas[s];
    if (c->phase == HB_PH_DONE)
      continue;
    c->wait.waits_for = waits_for(r, &c->wait);
    blocked++;
  }
  uint32_t *mark = df_alloc(&r->al, sizeof(uint32_t) * n);
  uint32_t *cycle = df_alloc(&r->al, sizeof(uint32_t) * n);
  df_host_wait *waits = df_alloc(&r->al, sizeof(df_host_wait) * blocked);
  if (!mark || !cycle || !waits) {
    df_free(&r->al, mark);
    df_free(&r->al, cycle);
    df_free(&r->al, waits);
    return hb_oom("a deadlock report");
  }
  memset(mark, 0, sizeof(uint32_t) * n);
  uint32_t cycle_len = find_cycle(r, mark, cycle);
  df_free(&r->al, mark);
  uint32_t w = 0;
  for (uint32_t s = 0; s < n; s++)
    if (r->ctas[s].phase != HB_PH_DONE)
      waits[w++] = r->ctas[s].wait;
  hb_text t;
  hb_text_init(&t, &r->al);
  write_report(&t, r, blocked, cycle, cycle_len);
  const df_host_wait *first = cycle_len ? &r->ctas[cycle[0]].wait : &waits[0];
  hb_site site = hb_site_at(r, first->instr, first->comm);
  site.cta = first->cta;
  site.queue_pos = first->queue_pos;
  site.slot = first->slot;
  df_free(&r->al, d->waits);
  df_free(&r->al, d->cycle);
  d->waits = waits;
  d->wait_count = blocked;
  d->cycle = cycle;
  d->cycle_length = cycle_len;
  return hb_fail_report(r, DF_HOST_DIAG_DEADLOCK, site, hb_text_take(&t));
}
