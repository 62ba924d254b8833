/* One virtual CTA as a state machine over its queue (REFERENCE 6 loop):
   per instruction the cluster receives, HBM receives/waits, the handler,
   HBM issues, then sends and releases; EXIT (or the queue's end) waits
   for outstanding cluster ACKs and finishes the CTA. Each hb_step call
   makes one unit of progress or reports the wait that blocks it. */
#include "host_internal.h"

void hb_block(hb_cta *c, df_host_wait_kind kind, uint32_t instr, uint32_t comm, uint32_t slot,
              uint32_t index, uint32_t awaited, uint32_t current, const hb_run *r) {
  df_host_wait *w = &c->wait;
  w->kind = kind;
  w->cta = c->id;
  w->instr = instr;
  w->queue_pos = instr != HB_S ? r->instr_pos[instr] : c->pc;
  w->comm = comm;
  w->slot = slot;
  w->index = index;
  w->awaited = awaited;
  w->current = current;
  w->waits_for = HB_S;
  c->blocked = true;
}

static bool kind_in(uint32_t kind, hb_phase ph) {
  switch (ph) {
  case HB_PH_CLUSTER_RECV: return kind == DF_COMM_CLUSTER_RECV;
  case HB_PH_HBM_RECV: return kind == DF_COMM_HBM_RECV || kind == DF_COMM_HBM_RECV_WAIT;
  case HB_PH_ISSUE: return kind == DF_COMM_HBM_RECV_ISSUE;
  case HB_PH_SEND:
    return kind == DF_COMM_CLUSTER_SEND || kind == DF_COMM_CLUSTER_RELEASE ||
           kind == DF_COMM_HBM_SEND;
  default: return false;
  }
}

/* The next transfer group of the current phase at or after the cursor. */
static uint32_t next_comm(const hb_run *r, const hb_cta *c) {
  const df_abi_instr *in = &r->k->instrs[c->cur];
  uint32_t end = in->comm_offset + in->comm_count;
  for (uint32_t j = c->cursor; j < end; j += hb_group_len(r->k, j))
    if (kind_in(r->k->comms[j].kind, c->phase))
      return j;
  return HB_S;
}

static void enter(hb_run *r, hb_cta *c, hb_phase ph) {
  c->phase = ph;
  c->cursor = r->k->instrs[c->cur].comm_offset;
}

static df_status run_comm(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res) {
  switch (r->k->comms[j].kind) {
  case DF_COMM_CLUSTER_RECV: return hb_cluster_recv(r, c, j, res);
  case DF_COMM_HBM_RECV:
  case DF_COMM_HBM_RECV_WAIT: return hb_hbm_recv(r, c, j, res);
  case DF_COMM_HBM_RECV_ISSUE: return hb_hbm_issue(r, c, j);
  case DF_COMM_CLUSTER_SEND: return hb_cluster_send(r, c, j, res);
  case DF_COMM_CLUSTER_RELEASE: return hb_cluster_release(r, c, j);
  case DF_COMM_HBM_SEND: return hb_hbm_send(r, c, j);
  default: return df_status_errorf(DF_EINTERNAL, "host backend: comm %u kind %u reached a phase",
                                   j, r->k->comms[j].kind);
  }
}

static df_status comm_phase(hb_run *r, hb_cta *c, hb_phase next, hb_step_result *res) {
  uint32_t j = next_comm(r, c);
  if (j == HB_S) {
    enter(r, c, next);
    return df_status_ok();
  }
  DF_TRY(run_comm(r, c, j, res));
  if (*res == HB_STEP_PROGRESS)
    c->cursor = j + hb_group_len(r->k, j);
  return df_status_ok();
}

/* The next instruction of a claimed pool item, else the next item the
   shared counter hands out (one claim per step; how CTAs interleave is
   the scheduler's quantum and order); false once the pool is empty. */
static bool pool_next(hb_run *r, hb_cta *c) {
  const df_packed *k = r->k;
  if (c->item_left) {
    c->item_left--;
    if (k->instrs[++c->cur].opcode != DF_ABI_OP_EXIT)
      return true;
    c->item_left = 0;
  }
  if (r->flags) /* the device's counter: every claim adds one, the last fails */
    r->flags[r->pool.counter]++;
  if (r->pool_next >= r->pool.items)
    return false;
  c->cur = r->pool.first + r->pool_next++ * r->pool.stride;
  c->item_left = r->pool.stride - 1;
  for (uint32_t i = c->cur; i < c->cur + r->pool.stride; i++) {
    r->instr_cta[i] = c->id;
    r->instr_pos[i] = c->pc;
  }
  return true;
}

static df_status fetch(hb_run *r, hb_cta *c) {
  if (c->pooled) {
    if (pool_next(r, c))
      goto run;
    c->pooled = false;
    c->pc++;
  }
  if (c->pc < c->qlen && r->k->instrs[c->q0 + c->pc].opcode == DF_ABI_OP_POOL) {
    c->pooled = true;
    c->item_left = 0;
    if (pool_next(r, c))
      goto run;
    c->pooled = false;
    c->pc++;
  }
  c->cur = c->q0 + c->pc;
  if (c->pc >= c->qlen || r->k->instrs[c->cur].opcode == DF_ABI_OP_EXIT) {
    c->phase = HB_PH_EXIT;
    return df_status_ok();
  }
run:
  c->t_ready = 0;
  enter(r, c, HB_PH_CLUSTER_RECV);
  return df_status_ok();
}

static df_status finish_exit(hb_run *r, hb_cta *c, hb_step_result *res) {
  DF_TRY(hb_exit_acks(r, c, res));
  if (*res != HB_STEP_PROGRESS)
    return df_status_ok();
  c->phase = HB_PH_DONE;
  if (c->pc < c->qlen)
    return hb_log_instr(r, c, c->q0 + c->pc, HB_S);
  return df_status_ok();
}

df_status hb_step(hb_run *r, hb_cta *c, hb_step_result *res) {
  *res = HB_STEP_PROGRESS;
  c->blocked = false;
  switch (c->phase) {
  case HB_PH_FETCH: return fetch(r, c);
  case HB_PH_CLUSTER_RECV: return comm_phase(r, c, HB_PH_HBM_RECV, res);
  case HB_PH_HBM_RECV: return comm_phase(r, c, HB_PH_DISPATCH, res);
  case HB_PH_DISPATCH:
    DF_TRY(hb_dispatch(r, c, c->cur, res));
    if (*res == HB_STEP_PROGRESS)
      enter(r, c, HB_PH_ISSUE);
    return df_status_ok();
  case HB_PH_ISSUE: return comm_phase(r, c, HB_PH_SEND, res);
  case HB_PH_SEND: return comm_phase(r, c, HB_PH_NEXT, res);
  case HB_PH_NEXT:
    if (!c->pooled)
      c->pc++;
    c->phase = HB_PH_FETCH;
    return df_status_ok();
  case HB_PH_EXIT: return finish_exit(r, c, res);
  case HB_PH_DONE: *res = HB_STEP_BLOCKED; return df_status_ok();
  }
  return df_status_errorf(DF_EINTERNAL, "host backend: CTA %u in unknown phase %d", c->id,
                          (int)c->phase);
}
