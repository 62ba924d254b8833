/* Plan blob writer: header, section table, 16-byte aligned sections,
   FNV-1a 64 checksum (format in include/df/blob.h). */
#include <string.h>

#include "blob_format.h"

void df_blob_buf_bytes(df_blob_buf *b, const void *p, size_t n) {
  if (b->failed || n == 0)
    return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n)
      cap *= 2;
    uint8_t *d = df_realloc(b->a, b->data, cap);
    if (!d) {
      b->failed = true;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  if (p)
    memcpy(b->data + b->len, p, n);
  else
    memset(b->data + b->len, 0, n);
  b->len += n;
}

void df_blob_buf_zeros(df_blob_buf *b, size_t n) { df_blob_buf_bytes(b, NULL, n); }

void df_blob_buf_u32(df_blob_buf *b, uint32_t v) {
  uint8_t w[4];
  df_put_le32(w, v);
  df_blob_buf_bytes(b, w, 4);
}

void df_blob_buf_i32(df_blob_buf *b, int32_t v) { df_blob_buf_u32(b, (uint32_t)v); }

void df_blob_buf_str(df_blob_buf *b, const char *s, size_t width) {
  size_t n = strnlen(s, width);
  df_blob_buf_bytes(b, s, n);
  df_blob_buf_zeros(b, width - n);
}

static void put_words(df_blob_buf *b, const uint32_t *w, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    df_blob_buf_u32(b, w[i]);
}

static void put_records(df_blob_buf *b, const void *recs, uint32_t count, uint32_t words) {
  uint32_t w[16];
  for (uint32_t i = 0; i < count; i++) {
    df_record_words((const char *)recs + (size_t)i * words * 4, w, words);
    put_words(b, w, words);
  }
}

static void put_handler(df_blob_buf *b, df_blob_buf *pool, const df_handler *h) {
  const df_variant *v = &h->variant;
  bool var = h->has_variant;
  uint32_t w[DF_BLOB_HANDLER_WORDS] = {
      h->id,
      (uint32_t)h->kind,
      h->has_identity,
      h->has_identity ? h->identity.operator_id : 0,
      h->has_identity ? (uint32_t)h->identity.kind : 0,
      var,
      var ? v->base.operator_id : 0,
      var ? (uint32_t)v->base.kind : 0,
      var ? v->schema_version : 0,
      var && v->has_iter,
      var && v->has_iter ? (uint32_t)v->iter_mode : 0,
      var && v->has_iter ? v->iter_value : 0,
      var && v->has_arity,
      var && v->has_arity ? (uint32_t)v->arity : 0,
      h->primary,
      h->impl[0] ? df_blob_pool_add(pool, h->impl, sizeof h->impl) + 1 : 0,
      df_blob_pool_add(pool, h->name, sizeof h->name),
      df_blob_pool_add(pool, h->symbol, sizeof h->symbol)};
  put_words(b, w, DF_BLOB_HANDLER_WORDS);
}

static void put_named(df_blob_buf *b, df_blob_buf *pool, const df_named_index *n) {
  df_blob_buf_u32(b, df_blob_pool_add(pool, n->name, sizeof n->name));
  df_blob_buf_u32(b, n->index);
  df_blob_buf_u32(b, (uint32_t)n->kind);
}

static void put_barriers(df_blob_buf *b, const df_barrier_alloc *ba) {
  uint32_t head[DF_BLOB_BARRIER_HEAD_WORDS] = {ba->barrier_count, ba->slot_count,
                                               ba->comm_count, ba->ack_count};
  put_words(b, head, DF_BLOB_BARRIER_HEAD_WORDS);
  put_words(b, ba->slot_barrier, ba->slot_count);
  put_words(b, ba->comm_barrier, ba->comm_count);
  put_words(b, ba->comm_phase, ba->comm_count);
  put_words(b, ba->comm_ack, ba->comm_count);
}

static void put_launch(df_blob_buf *b, const df_launch_package *l, uint32_t sm_count) {
  for (uint32_t i = 0; i < df_launch_u32_field_count; i++)
    df_blob_buf_u32(b, df_launch_u32_get(l, i));
  df_blob_buf_u32(b, l->needs_flag_reset);
  df_blob_buf_u32(b, l->barrier_init_count);
  put_words(b, l->barrier_init_offsets, sm_count);
  put_words(b, l->barrier_init_lengths, sm_count);
  put_words(b, l->barrier_init_indices, l->barrier_init_count);
}

/* One section of the packed plan (not strings or program). */
static void put_section(df_blob_buf *b, df_blob_buf *pool, const df_packed *k, uint32_t id) {
  uint32_t sm = k->topology.sm_count;
  switch ((df_blob_section)id) {
  case DF_BLOB_SEC_INSTRUCTIONS: put_records(b, k->instrs, k->instr_count, DF_INSTR_WORDS); break;
  case DF_BLOB_SEC_SLOTS: put_records(b, k->slots, k->slot_count, DF_SLOT_WORDS); break;
  case DF_BLOB_SEC_COMMS: put_records(b, k->comms, k->comm_count, DF_COMM_WORDS); break;
  case DF_BLOB_SEC_ARGS: put_records(b, k->args, k->arg_count, DF_ARGS_WORDS); break;
  case DF_BLOB_SEC_QUEUE_OFFSETS: put_words(b, k->queue_offsets, sm); break;
  case DF_BLOB_SEC_QUEUE_LENGTHS: put_words(b, k->queue_lengths, sm); break;
  case DF_BLOB_SEC_INPUT_SLOTS: put_words(b, k->input_slots, k->input_slot_count); break;
  case DF_BLOB_SEC_TASK_COORDS: put_words(b, k->task_coords, k->task_coord_count); break;
  case DF_BLOB_SEC_PACK_ORDER: put_words(b, k->pack_order, k->instr_count); break;
  case DF_BLOB_SEC_HANDLERS:
    for (uint32_t i = 0; i < k->handler_count; i++)
      put_handler(b, pool, &k->handlers[i]);
    break;
  case DF_BLOB_SEC_OPERATORS:
    for (uint32_t i = 0; i < k->operator_count; i++)
      put_named(b, pool, &k->operators[i]);
    break;
  case DF_BLOB_SEC_TYPES:
    for (uint32_t i = 0; i < k->type_count; i++)
      put_named(b, pool, &k->types[i]);
    break;
  case DF_BLOB_SEC_BARRIERS: put_barriers(b, &k->barriers); break;
  case DF_BLOB_SEC_LAUNCH: put_launch(b, &k->launch, sm); break;
  case DF_BLOB_SEC_TOPOLOGY: {
    uint32_t w[DF_BLOB_TOPOLOGY_WORDS] = {
        k->topology.sm_count,   k->topology.cluster_size, k->shared_slot_bytes,
        k->global_staging_bytes, k->scratch_bytes,        k->primary_handler_count,
        0,                      0};
    put_words(b, w, DF_BLOB_TOPOLOGY_WORDS);
    break;
  }
  case DF_BLOB_SEC_FINGERPRINT:
    df_blob_buf_str(b, k->fingerprint, DF_BLOB_FINGERPRINT_BYTES);
    break;
  default: break;
  }
}

/* Record count stored in a section's table entry. */
static uint32_t section_count(const df_packed *k, uint32_t id) {
  switch ((df_blob_section)id) {
  case DF_BLOB_SEC_INSTRUCTIONS: return k->instr_count;
  case DF_BLOB_SEC_SLOTS: return k->slot_count;
  case DF_BLOB_SEC_COMMS: return k->comm_count;
  case DF_BLOB_SEC_ARGS: return k->arg_count;
  case DF_BLOB_SEC_QUEUE_OFFSETS:
  case DF_BLOB_SEC_QUEUE_LENGTHS: return k->topology.sm_count;
  case DF_BLOB_SEC_INPUT_SLOTS: return k->input_slot_count;
  case DF_BLOB_SEC_TASK_COORDS: return k->task_coord_count;
  case DF_BLOB_SEC_PACK_ORDER: return k->instr_count;
  case DF_BLOB_SEC_HANDLERS: return k->handler_count;
  case DF_BLOB_SEC_OPERATORS: return k->operator_count;
  case DF_BLOB_SEC_TYPES: return k->type_count;
  default: return 1;
  }
}

static void pad16(df_blob_buf *b) {
  df_blob_buf_zeros(b, (DF_BLOB_ALIGN - b->len % DF_BLOB_ALIGN) % DF_BLOB_ALIGN);
}

/* Array pointers may be NULL only when their count is 0. */
static df_status check_arrays(const df_packed *k) {
  const df_launch_package *l = &k->launch;
  const df_barrier_alloc *ba = &k->barriers;
  struct {
    const void *p;
    uint32_t n;
    const char *what;
  } arr[] = {
      {k->instrs, k->instr_count, "instrs"},
      {k->pack_order, k->instr_count, "pack_order"},
      {k->slots, k->slot_count, "slots"},
      {k->comms, k->comm_count, "comms"},
      {k->args, k->arg_count, "args"},
      {k->queue_offsets, k->topology.sm_count, "queue_offsets"},
      {k->queue_lengths, k->topology.sm_count, "queue_lengths"},
      {k->input_slots, k->input_slot_count, "input_slots"},
      {k->task_coords, k->task_coord_count, "task_coords"},
      {k->handlers, k->handler_count, "handlers"},
      {k->operators, k->operator_count, "operators"},
      {k->types, k->type_count, "types"},
      {ba->slot_barrier, ba->slot_count, "barriers.slot_barrier"},
      {ba->comm_barrier, ba->comm_count, "barriers.comm_barrier"},
      {ba->comm_phase, ba->comm_count, "barriers.comm_phase"},
      {ba->comm_ack, ba->comm_count, "barriers.comm_ack"},
      {l->barrier_init_offsets, k->topology.sm_count, "launch.barrier_init_offsets"},
      {l->barrier_init_lengths, k->topology.sm_count, "launch.barrier_init_lengths"},
      {l->barrier_init_indices, l->barrier_init_count, "launch.barrier_init_indices"},
  };
  for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
    if (!arr[i].p && arr[i].n)
      return df_status_errorf(DF_EINVAL, "%s is NULL but has %u entries", arr[i].what,
                              arr[i].n);
  return df_status_ok();
}

static df_status check_writable(const df_packed *k, const df_program *prog) {
  DF_TRY(check_arrays(k));
  /* The reader's checks report DF_EFORMAT; here the caller's plan is at
     fault. */
  df_status s = df_blob_check_packed(k);
  if (df_failed(&s)) {
    if (s.code != DF_ENOMEM)
      s.code = DF_EINVAL;
    return s;
  }
  if (prog) {
    s = df_blob_check_program(prog);
    if (df_failed(&s)) {
      if (s.code != DF_ENOMEM)
        s.code = DF_EINVAL;
      return df_status_wrap(s, "program");
    }
  }
  return df_status_ok();
}

static void append(df_blob_buf *b, const df_blob_buf *part) {
  if (part->failed)
    b->failed = true;
  else
    df_blob_buf_bytes(b, part->data, part->len);
}

df_status df_blob_write(const df_packed *k, const df_program *prog, const df_allocator *alloc,
                        uint8_t **bytes, size_t *len) {
  *bytes = NULL;
  *len = 0;
  if (!k)
    return df_status_errorf(DF_EINVAL, "plan blob write: no packed plan");
  DF_TRY(df_status_wrap(check_writable(k, prog), "plan blob write"));
  df_allocator a = df_allocator_or_default(alloc);
  df_blob_buf b = {&a, NULL, 0, 0, false};
  df_blob_buf pool = {&a, NULL, 0, 0, false};
  df_blob_buf progb = {&a, NULL, 0, 0, false};
  uint32_t nsec = prog ? DF_BLOB_SEC_PROGRAM : DF_BLOB_SEC_PROGRAM - 1;
  /* The program goes last but its strings must be in the pool, which
     precedes it: encode it first. */
  if (prog)
    df_blob_put_program(&progb, &pool, prog);

  df_blob_buf_zeros(&b, DF_BLOB_HEADER_BYTES + (size_t)nsec * DF_BLOB_ENTRY_BYTES);
  uint32_t offs[DF_BLOB_SEC_PROGRAM + 1], lens[DF_BLOB_SEC_PROGRAM + 1];
  df_status st = df_status_ok();
  for (uint32_t id = 1; id <= nsec; id++) {
    pad16(&b);
    size_t start = b.len;
    if (id == DF_BLOB_SEC_STRINGS)
      append(&b, &pool);
    else if (id == DF_BLOB_SEC_PROGRAM)
      append(&b, &progb);
    else
      put_section(&b, &pool, k, id);
    if (b.len > UINT32_MAX - DF_BLOB_ALIGN - DF_BLOB_CHECKSUM_BYTES) {
      st = df_status_errorf(DF_EUNSUPPORTED, "plan blob write: section '%s' ends past 4 GiB",
                            df_blob_section_name(id));
      break;
    }
    offs[id] = (uint32_t)start;
    lens[id] = (uint32_t)(b.len - start);
  }
  pad16(&b);
  df_blob_buf_zeros(&b, DF_BLOB_CHECKSUM_BYTES);
  if (!df_failed(&st) && (b.failed || pool.failed || progb.failed))
    st = df_status_errorf(DF_ENOMEM, "plan blob write: out of memory");
  df_free(&a, pool.data);
  df_free(&a, progb.data);
  if (df_failed(&st)) {
    df_free(&a, b.data);
    return st;
  }

  uint8_t *h = b.data;
  memcpy(h, DF_BLOB_MAGIC, DF_BLOB_MAGIC_BYTES);
  df_put_le32(h + 8, DF_BLOB_FORMAT_VERSION);
  df_put_le32(h + 12, k->abi_version);
  df_put_le32(h + 16, DF_BLOB_HEADER_BYTES);
  df_put_le32(h + 20, nsec);
  df_put_le64(h + 24, b.len);
  for (uint32_t id = 1; id <= nsec; id++) {
    uint8_t *e = h + DF_BLOB_HEADER_BYTES + (size_t)(id - 1) * DF_BLOB_ENTRY_BYTES;
    df_put_le32(e, id);
    df_put_le32(e + 4, section_count(k, id));
    df_put_le32(e + 8, offs[id]);
    df_put_le32(e + 12, lens[id]);
  }
  df_blob_reseal(b.data, b.len);
  *bytes = b.data;
  *len = b.len;
  return df_status_ok();
}
