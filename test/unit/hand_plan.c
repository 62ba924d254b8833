#include "hand_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(df_status s, const char *what) {
  if (s.code != DF_OK) {
    fprintf(stderr, "hand plan failed at %s: %s\n", what, s.message);
    abort();
  }
}

df_plan *hand_plan_new(uint32_t sm_count, uint32_t cluster_size, uint32_t slot_bytes) {
  df_plan *p;
  df_topology t = {sm_count, cluster_size};
  check(df_plan_create(NULL, t, &p), "create");
  check(df_plan_add_type(p, "T", slot_bytes, NULL), "type");
  df_plan_stage st;
  memset(&st, 0, sizeof st);
  snprintf(st.name, sizeof st.name, "work");
  snprintf(st.op_name, sizeof st.op_name, "work");
  st.kind = DF_STAGE_MAP;
  st.op_kind = DF_OPK_MAP;
  check(df_plan_add_stage(p, &st, NULL), "stage");
  uint32_t len = 1;
  check(df_plan_set_tasks(p, 1, &len), "tasks");
  snprintf(p->range_axis, sizeof p->range_axis, "r");
  return p;
}

uint32_t hand_slot(df_plan *p) {
  df_slot s;
  memset(&s, 0, sizeof s);
  s.task = 0;
  s.type = 0;
  s.role = DF_ROLE_PARTIAL;
  s.stage = -1;
  s.producer = DF_SENTINEL;
  s.shared_storage = DF_SENTINEL;
  s.global_storage = DF_SENTINEL;
  s.owner = DF_SENTINEL;
  uint32_t id;
  check(df_plan_add_slot(p, &s, &id), "slot");
  return id;
}

uint32_t hand_instr(df_plan *p, df_instr_op op, uint32_t sm, const uint32_t *in,
                    uint32_t n_in, uint32_t out) {
  df_instr d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.task = op == DF_INSTR_EXIT ? DF_SENTINEL : 0;
  d.sm = sm;
  d.output_slot = out;
  d.stage = op == DF_INSTR_MAP ? 0 : -1;
  uint32_t id;
  check(df_plan_add_instr(p, &d, in, n_in, &id), "instr");
  if (out != DF_SENTINEL)
    p->slots[out].producer = id;
  return id;
}

void hand_transfer(df_plan *p, bool cluster, uint32_t src_instr, uint32_t dst_instr,
                   uint32_t src_slot, uint32_t dst_slot, uint32_t epoch) {
  df_comm c;
  memset(&c, 0, sizeof c);
  c.src_instr = src_instr;
  c.dst_instr = dst_instr;
  c.src_slot = src_slot;
  c.dst_slot = dst_slot;
  c.producer_sm = p->instrs[src_instr].sm;
  c.consumer_sm = p->instrs[dst_instr].sm;
  c.dispatch_instr = DF_SENTINEL;
  c.peer_cta_rank = DF_SENTINEL;
  c.flag_epoch = epoch;
  c.segment_count = 1;
  c.gate_id = DF_SENTINEL;
  c.kind = cluster ? DF_COMM_CLUSTER_SEND : DF_COMM_HBM_SEND;
  check(df_plan_add_comm(p, &c), "send");
  c.kind = cluster ? DF_COMM_CLUSTER_RECV : DF_COMM_HBM_RECV;
  check(df_plan_add_comm(p, &c), "recv");
}

void hand_finish(df_plan *p) {
  check(df_plan_build_queues(p, NULL, 0), "queues");
  check(df_plan_attach_handlers(p), "handlers");
}

static uint32_t remap(const uint32_t *to, uint32_t id) {
  return id == DF_SENTINEL ? DF_SENTINEL : to[id];
}

df_plan *hand_permute(const df_plan *p, const uint32_t *order) {
  uint32_t n = p->instr_count;
  uint32_t *to = malloc(sizeof(uint32_t) * n);
  for (uint32_t i = 0; i < n; i++)
    to[order[i]] = i;
  df_plan *q;
  check(df_plan_create(NULL, p->topology, &q), "create");
  q->block_size = p->block_size;
  memcpy(q->range_axis, p->range_axis, sizeof q->range_axis);
  q->policy = p->policy;
  q->strategy = p->strategy;
  q->extent_count = p->extent_count;
  memcpy(q->extents, p->extents, sizeof q->extents);
  check(df_plan_set_tasks(q, p->task_count, p->task_lengths), "tasks");
  for (uint32_t i = 0; i < p->stage_count; i++)
    check(df_plan_add_stage(q, &p->stages[i], NULL), "stage");
  for (uint32_t i = 0; i < p->type_count; i++)
    check(df_plan_add_type(q, p->types[i].name, p->types[i].bytes, NULL), "type");
  for (uint32_t i = 0; i < n; i++) {
    const df_instr *in = &p->instrs[order[i]];
    check(df_plan_add_instr(q, in, df_plan_instr_inputs(p, in), in->input_count, NULL),
          "instr");
  }
  for (uint32_t i = 0; i < p->slot_count; i++) {
    df_slot s = p->slots[i];
    s.producer = remap(to, s.producer);
    check(df_plan_add_slot(q, &s, NULL), "slot");
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    df_comm c = p->comms[i];
    c.src_instr = remap(to, c.src_instr);
    c.dst_instr = remap(to, c.dst_instr);
    c.dispatch_instr = remap(to, c.dispatch_instr);
    check(df_plan_add_comm(q, &c), "comm");
  }
  uint32_t *ids = malloc(sizeof(uint32_t) * (p->queue_id_count + 1));
  for (uint32_t i = 0; i < p->queue_id_count; i++)
    ids[i] = to[p->queue_ids[i]];
  check(df_plan_set_queues(q, p->queue_lengths, ids, p->queue_id_count), "queues");
  free(ids);
  free(to);
  return q;
}

uint32_t hand_find_comm(const df_plan *p, df_comm_kind kind) {
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].kind == kind)
      return i;
  return DF_SENTINEL;
}

void hand_append_release(df_plan *p) {
  df_comm c = p->comms[hand_find_comm(p, DF_COMM_CLUSTER_SEND)];
  c.kind = DF_COMM_CLUSTER_RELEASE;
  c.dispatch_instr = c.dst_instr;
  uint32_t producer = c.producer_sm;
  c.producer_sm = c.consumer_sm;
  c.consumer_sm = producer;
  c.peer_cta_rank = df_topology_cluster_rank(&p->topology, producer);
  check(df_plan_add_comm(p, &c), "release");
}

void hand_set_comms(df_plan *p, const df_comm *comms, uint32_t n) {
  p->comm_count = 0;
  for (uint32_t i = 0; i < n; i++)
    check(df_plan_add_comm(p, &comms[i]), "comm");
}

void hand_segment_first_hbm(df_plan *p, uint32_t n, uint32_t bytes) {
  const df_comm *r = &p->comms[hand_find_comm(p, DF_COMM_HBM_RECV)];
  uint32_t key[4] = {r->src_instr, r->dst_instr, r->src_slot, r->dst_slot};
  df_comm *out = malloc(sizeof(df_comm) * (p->comm_count + 2 * n));
  uint32_t m = 0;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    bool hit = c->src_instr == key[0] && c->dst_instr == key[1] && c->src_slot == key[2] &&
               c->dst_slot == key[3] &&
               (c->kind == DF_COMM_HBM_SEND || c->kind == DF_COMM_HBM_RECV);
    if (!hit) {
      out[m++] = *c;
      continue;
    }
    for (uint32_t s = 0; s < n; s++) {
      out[m] = *c;
      out[m].byte_offset = s * bytes;
      out[m].byte_count = bytes;
      out[m].segment_id = s;
      out[m].segment_count = n;
      out[m].flag_epoch = s + 1;
      m++;
    }
  }
  hand_set_comms(p, out, m);
  free(out);
}

bool hand_error_has(df_status s, const char *needle) {
  if (s.code == DF_OK) {
    fprintf(stderr, "expected an error containing '%s', got success\n", needle);
    return false;
  }
  if (!strstr(s.message, needle)) {
    fprintf(stderr, "expected an error containing '%s', got '%s'\n", needle, s.message);
    return false;
  }
  return true;
}
