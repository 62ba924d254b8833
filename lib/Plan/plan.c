/* The plan container: creation, growth, queues, deep copy. */
#include <stdlib.h>
#include <string.h>

#include "df/plan.h"
#include "vec.h"

df_status df_topology_check(const df_topology *t) {
  if (t->sm_count == 0)
    return df_status_errorf(DF_EINVAL, "GPUTopology sm_count must be positive, got %u",
                            t->sm_count);
  if (t->cluster_size == 0)
    return df_status_errorf(DF_EINVAL, "GPUTopology cluster_size must be positive, got %u",
                            t->cluster_size);
  if (t->cluster_size > t->sm_count)
    return df_status_errorf(DF_EINVAL,
                            "GPUTopology cluster_size %u must not exceed sm_count %u",
                            t->cluster_size, t->sm_count);
  return df_status_ok();
}

df_status df_plan_create(const df_allocator *alloc, df_topology topology,
                         df_plan **out) {
  *out = NULL;
  DF_TRY(df_topology_check(&topology));
  df_allocator a = df_allocator_or_default(alloc);
  df_plan *p = df_alloc(&a, sizeof *p);
  if (!p)
    return df_status_errorf(DF_ENOMEM, "out of memory creating a plan");
  memset(p, 0, sizeof *p);
  p->alloc = a;
  p->topology = topology;
  p->block_size = 1;
  p->queue_offsets = df_alloc(&a, sizeof(uint32_t) * topology.sm_count);
  p->queue_lengths = df_alloc(&a, sizeof(uint32_t) * topology.sm_count);
  if (!p->queue_offsets || !p->queue_lengths) {
    df_plan_destroy(p);
    return df_status_errorf(DF_ENOMEM, "out of memory creating plan queues");
  }
  memset(p->queue_offsets, 0, sizeof(uint32_t) * topology.sm_count);
  memset(p->queue_lengths, 0, sizeof(uint32_t) * topology.sm_count);
  *out = p;
  return df_status_ok();
}

void df_plan_destroy(df_plan *p) {
  if (!p)
    return;
  df_allocator a = p->alloc;
  df_free(&a, p->task_lengths);
  df_free(&a, p->stages);
  df_free(&a, p->types);
  df_free(&a, p->instrs);
  df_free(&a, p->slots);
  df_free(&a, p->comms);
  df_free(&a, p->inputs);
  df_free(&a, p->queue_offsets);
  df_free(&a, p->queue_lengths);
  df_free(&a, p->queue_ids);
  df_free(&a, p->impl_names);
  df_free(&a, p);
}

static df_status dup_array(const df_allocator *a, void **dst, const void *src,
                           size_t bytes) {
  *dst = NULL;
  if (!src || bytes == 0)
    return df_status_ok();
  *dst = df_alloc(a, bytes);
  if (!*dst)
    return df_status_errorf(DF_ENOMEM, "out of memory copying a plan");
  memcpy(*dst, src, bytes);
  return df_status_ok();
}

df_status df_plan_clone(const df_plan *p, df_plan **out) {
  *out = NULL;
  const df_allocator *a = &p->alloc;
  df_plan *c = df_alloc(a, sizeof *c);
  if (!c)
    return df_status_errorf(DF_ENOMEM, "out of memory copying a plan");
  *c = *p;
  c->task_lengths = NULL;
  c->stages = NULL;
  c->types = NULL;
  c->instrs = NULL;
  c->slots = NULL;
  c->comms = NULL;
  c->inputs = NULL;
  c->queue_offsets = c->queue_lengths = c->queue_ids = NULL;
  c->impl_names = NULL;
  df_status s = df_status_ok();
#define DUP(field, count)                                                      \
  if (s.code == DF_OK)                                                         \
    s = dup_array(a, (void **)&c->field, p->field, sizeof(*p->field) * (size_t)(count));
  DUP(task_lengths, p->task_count);
  DUP(stages, p->stage_count);
  DUP(types, p->type_count);
  DUP(instrs, p->instr_count);
  DUP(slots, p->slot_count);
  DUP(comms, p->comm_count);
  DUP(inputs, p->input_count);
  DUP(queue_offsets, p->topology.sm_count);
  DUP(queue_lengths, p->topology.sm_count);
  DUP(queue_ids, p->queue_id_count);
  DUP(impl_names, p->impl_count);
#undef DUP
  c->instr_cap = p->instr_count;
  c->slot_cap = p->slot_count;
  c->comm_cap = p->comm_count;
  c->input_cap = p->input_count;
  c->queue_id_cap = p->queue_id_count;
  if (s.code != DF_OK) {
    df_plan_destroy(c);
    return s;
  }
  *out = c;
  return df_status_ok();
}

df_status df_plan_add_type(df_plan *p, const char *name, uint32_t bytes,
                           int32_t *index) {
  uint32_t cap = p->type_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->types, &cap, p->type_count + 1,
                        sizeof *p->types));
  df_plan_type *t = &p->types[p->type_count];
  DF_TRY(df_name_copy(t->name, sizeof t->name, name, "intermediate type name"));
  t->bytes = bytes;
  if (index)
    *index = (int32_t)p->type_count;
  p->type_count++;
  return df_status_ok();
}

df_status df_plan_add_stage(df_plan *p, const df_plan_stage *s, int32_t *index) {
  uint32_t cap = p->stage_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->stages, &cap, p->stage_count + 1,
                        sizeof *p->stages));
  p->stages[p->stage_count] = *s;
  if (index)
    *index = (int32_t)p->stage_count;
  p->stage_count++;
  return df_status_ok();
}

df_status df_plan_add_instr(df_plan *p, const df_instr *in,
                            const uint32_t *inputs, uint32_t input_count,
                            uint32_t *id) {
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->instrs, &p->instr_cap,
                        p->instr_count + 1, sizeof *p->instrs));
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->inputs, &p->input_cap,
                        p->input_count + input_count, sizeof *p->inputs));
  df_instr *d = &p->instrs[p->instr_count];
  *d = *in;
  d->id = p->instr_count;
  d->input_offset = p->input_count;
  d->input_count = input_count;
  if (input_count)
    memcpy(p->inputs + p->input_count, inputs, sizeof(uint32_t) * input_count);
  p->input_count += input_count;
  if (id)
    *id = d->id;
  p->instr_count++;
  return df_status_ok();
}

df_status df_plan_add_slot(df_plan *p, const df_slot *s, uint32_t *id) {
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->slots, &p->slot_cap,
                        p->slot_count + 1, sizeof *p->slots));
  df_slot *d = &p->slots[p->slot_count];
  *d = *s;
  d->id = p->slot_count;
  if (id)
    *id = d->id;
  p->slot_count++;
  return df_status_ok();
}

df_status df_plan_add_comm(df_plan *p, const df_comm *c) {
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->comms, &p->comm_cap,
                        p->comm_count + 1, sizeof *p->comms));
  p->comms[p->comm_count++] = *c;
  return df_status_ok();
}

df_status df_plan_intern_impl(df_plan *p, const char *name, uint32_t *ref) {
  size_t len = strlen(name);
  if (len == 0 || len >= DF_NAME_MAX)
    return df_status_errorf(DF_EINVAL,
                            "implementation name '%s' must be 1 to %d bytes long", name,
                            DF_NAME_MAX - 1);
  for (uint32_t i = 0; i < p->impl_count; i++)
    if (strcmp(p->impl_names[i].name, name) == 0) {
      *ref = i + 1;
      return df_status_ok();
    }
  /* a handful of names per plan: grow by one */
  df_plan_impl_name *t = df_alloc(&p->alloc, sizeof *t * (p->impl_count + 1));
  if (!t)
    return df_status_errorf(DF_ENOMEM, "out of memory recording implementation '%s'", name);
  if (p->impl_count)
    memcpy(t, p->impl_names, sizeof *t * p->impl_count);
  memset(&t[p->impl_count], 0, sizeof *t);
  memcpy(t[p->impl_count].name, name, len);
  df_free(&p->alloc, p->impl_names);
  p->impl_names = t;
  *ref = ++p->impl_count;
  return df_status_ok();
}

df_status df_plan_set_tasks(df_plan *p, uint32_t task_count,
                            const uint32_t *lengths) {
  uint32_t *t = df_alloc(&p->alloc, sizeof(uint32_t) * (task_count ? task_count : 1));
  if (!t)
    return df_status_errorf(DF_ENOMEM, "out of memory storing %u task lengths", task_count);
  if (task_count)
    memcpy(t, lengths, sizeof(uint32_t) * task_count);
  df_free(&p->alloc, p->task_lengths);
  p->task_lengths = t;
  p->task_count = task_count;
  return df_status_ok();
}

df_status df_plan_build_queues(df_plan *p, const uint32_t *order, uint32_t count) {
  uint32_t n = order ? count : p->instr_count;
  uint32_t sms = p->topology.sm_count;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = order ? order[i] : i;
    if (id >= p->instr_count)
      return df_status_errorf(DF_EINVAL, "queue order names instruction %u, plan has %u",
                              id, p->instr_count);
    if (p->instrs[id].sm >= sms)
      return df_status_errorf(DF_EINVAL,
                              "instruction %u is placed on SM %u, outside topology "
                              "(sm_count=%u)", id, p->instrs[id].sm, sms);
  }
  memset(p->queue_lengths, 0, sizeof(uint32_t) * sms);
  for (uint32_t i = 0; i < n; i++)
    p->queue_lengths[p->instrs[order ? order[i] : i].sm]++;
  uint32_t off = 0;
  for (uint32_t s = 0; s < sms; s++) {
    p->queue_offsets[s] = off;
    off += p->queue_lengths[s];
  }
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->queue_ids, &p->queue_id_cap, n,
                        sizeof *p->queue_ids));
  memset(p->queue_lengths, 0, sizeof(uint32_t) * sms);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = order ? order[i] : i;
    uint32_t sm = p->instrs[id].sm;
    p->queue_ids[p->queue_offsets[sm] + p->queue_lengths[sm]++] = id;
  }
  p->queue_id_count = n;
  return df_status_ok();
}

df_status df_plan_set_queues(df_plan *p, const uint32_t *lengths,
                             const uint32_t *ids, uint32_t id_count) {
  uint64_t total = 0;
  for (uint32_t s = 0; s < p->topology.sm_count; s++)
    total += lengths[s];
  if (total != id_count)
    return df_status_errorf(DF_EINVAL, "queue lengths sum to %llu but %u ids were given",
                            (unsigned long long)total, id_count);
  for (uint32_t i = 0; i < id_count; i++)
    if (ids[i] >= p->instr_count)
      return df_status_errorf(DF_EINVAL, "queue entry %u names instruction %u, plan has %u",
                              i, ids[i], p->instr_count);
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->queue_ids, &p->queue_id_cap,
                        id_count, sizeof *p->queue_ids));
  if (id_count)
    memcpy(p->queue_ids, ids, sizeof(uint32_t) * id_count);
  uint32_t off = 0;
  for (uint32_t s = 0; s < p->topology.sm_count; s++) {
    p->queue_offsets[s] = off;
    p->queue_lengths[s] = lengths[s];
    off += lengths[s];
  }
  p->queue_id_count = id_count;
  return df_status_ok();
}

df_status df_plan_check_queue(const df_plan *p, uint32_t sm) {
  uint64_t off = p->queue_offsets[sm], len = p->queue_lengths[sm];
  if (off + len > p->queue_id_count)
    return df_status_errorf(DF_EINVAL,
                            "queue of SM %u (offset %llu, length %llu) exceeds the %u "
                            "queued instruction ids",
                            sm, (unsigned long long)off, (unsigned long long)len,
                            p->queue_id_count);
  return df_status_ok();
}

uint32_t df_plan_task_coords(const df_plan *p, uint32_t task,
                             uint32_t coords[DF_MAX_AXES]) {
  if (p->extent_count == 0) {
    coords[0] = task;
    return 1;
  }
  uint32_t rest = task;
  for (uint32_t i = p->extent_count; i-- > 0;) {
    coords[i] = rest % p->extents[i];
    rest /= p->extents[i];
  }
  return p->extent_count;
}

uint32_t df_comm_dispatch(const df_comm *c) {
  if (c->dispatch_instr != DF_SENTINEL)
    return c->dispatch_instr;
  return df_comm_kind_is_recv(c->kind) ? c->dst_instr : c->src_instr;
}

bool df_comm_kind_is_recv(df_comm_kind k) {
  return k == DF_COMM_CLUSTER_RECV || k == DF_COMM_HBM_RECV ||
         k == DF_COMM_HBM_RECV_ISSUE || k == DF_COMM_HBM_RECV_WAIT;
}

bool df_comm_kind_is_hbm(df_comm_kind k) {
  return k == DF_COMM_HBM_SEND || k == DF_COMM_HBM_RECV ||
         k == DF_COMM_HBM_RECV_ISSUE || k == DF_COMM_HBM_RECV_WAIT;
}

bool df_comm_kind_is_cluster(df_comm_kind k) {
  return k == DF_COMM_CLUSTER_SEND || k == DF_COMM_CLUSTER_RECV ||
         k == DF_COMM_CLUSTER_RELEASE;
}
