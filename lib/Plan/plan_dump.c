/* Text dump of a packed plan: one record per line, `field=value` pairs
   in abi.h order, the sentinel as `S`, so lit tests can FileCheck it.
   New fields go at the end of a line to keep old checks valid. */
#include <stdio.h>

#include "blob_format.h"

static void val(FILE *f, const char *name, uint32_t v) {
  if (v == DF_SENTINEL)
    fprintf(f, " %s=S", name);
  else
    fprintf(f, " %s=%u", name, v);
}

static void hex(FILE *f, const char *name, uint32_t v) {
  if (v == DF_SENTINEL)
    fprintf(f, " %s=S", name);
  else
    fprintf(f, " %s=0x%x", name, v);
}

/* One ABI record: `<tag> <i>: f=v ...`; fields named *flags in hex. */
static void record(FILE *f, const char *tag, uint32_t i, const void *rec,
                   const char *const *names, uint32_t words) {
  uint32_t w[16];
  df_record_words(rec, w, words);
  fprintf(f, "%s %u:", tag, i);
  for (uint32_t j = 0; j < words; j++) {
    size_t n = strlen(names[j]);
    bool is_flags = n >= 5 && strcmp(names[j] + n - 5, "flags") == 0;
    (is_flags ? hex : val)(f, names[j], w[j]);
  }
  fputc('\n', f);
}

static void list(FILE *f, const char *name, const uint32_t *v, uint32_t n) {
  fprintf(f, "%s:", name);
  for (uint32_t i = 0; i < n; i++) {
    if (v[i] == DF_SENTINEL)
      fputs(" S", f);
    else
      fprintf(f, " %u", v[i]);
  }
  fputc('\n', f);
}

static void identity(FILE *f, const char *key, const df_identity *id) {
  fprintf(f, " %s=%u:%s", key, id->operator_id, df_op_kind_name(id->kind));
}

static void handler(FILE *f, const df_handler *h) {
  fprintf(f, "handler %u: name=%.64s kind=%s primary=%d symbol=%.128s", h->id, h->name,
          df_op_kind_name(h->kind), h->primary, h->symbol);
  if (h->impl[0])
    fprintf(f, " impl=%.64s", h->impl);
  if (h->has_identity)
    identity(f, "identity", &h->identity);
  else
    fputs(" identity=none", f);
  if (!h->has_variant) {
    fputs(" variant=none", f);
    /* a composite of fused instructions (docs/fusion.md) */
    for (uint32_t i = 0; i < h->part_count; i++)
      fprintf(f, "%s%u", i ? "," : " parts=", h->parts[i]);
    fputc('\n', f);
    return;
  }
  const df_variant *v = &h->variant;
  identity(f, "variant", &v->base);
  fprintf(f, ",schema_version=%u", v->schema_version);
  if (v->has_iter) {
    fprintf(f, ",iter_range=%s", df_blob_iter_mode_name(v->iter_mode));
    if (v->iter_mode != DF_ITER_GENERIC)
      fprintf(f, ":%u", v->iter_value);
  }
  if (v->has_arity)
    fprintf(f, ",reduce_arity=%s", df_blob_arity_name(v->arity));
  fputc('\n', f);
}

static void barriers(FILE *f, const df_barrier_alloc *b) {
  fprintf(f, "barriers: barrier_count=%u ack_count=%u slot_count=%u comm_count=%u\n",
          b->barrier_count, b->ack_count, b->slot_count, b->comm_count);
  for (uint32_t i = 0; i < b->slot_count; i++) {
    fprintf(f, "barrier_slot %u:", i);
    val(f, "barrier_index", b->slot_barrier[i]);
    fputc('\n', f);
  }
  for (uint32_t i = 0; i < b->comm_count; i++) {
    fprintf(f, "barrier_comm %u:", i);
    val(f, "barrier_index", b->comm_barrier[i]);
    val(f, "barrier_phase", b->comm_phase[i]);
    val(f, "ack_index", b->comm_ack[i]);
    fputc('\n', f);
  }
}

static void launch(FILE *f, const df_launch_package *l, uint32_t sm_count) {
  fputs("launch_package:\n", f);
  for (uint32_t i = 0; i < df_launch_u32_field_count; i++)
    fprintf(f, "  %s=%u\n", df_launch_u32_fields[i].name, df_launch_u32_get(l, i));
  fprintf(f, "  needs_flag_reset=%d\n", l->needs_flag_reset);
  fprintf(f, "  barrier_init_count=%u\n", l->barrier_init_count);
  for (uint32_t s = 0; s < sm_count; s++) {
    fprintf(f, "  barrier_init %u: offset=%u length=%u indices=", s,
            l->barrier_init_offsets[s], l->barrier_init_lengths[s]);
    uint32_t off = l->barrier_init_offsets[s], n = l->barrier_init_lengths[s];
    for (uint32_t j = 0; j < n && (uint64_t)off + j < l->barrier_init_count; j++)
      fprintf(f, "%s%u", j ? "," : "", l->barrier_init_indices[off + j]);
    fputc('\n', f);
  }
}

df_status df_packed_dump_text(const df_packed *k, FILE *f) {
  if (!k || !f)
    return df_status_errorf(DF_EINVAL, "plan dump: no packed plan or no output");
  fprintf(f, "plan: abi_version=%u sm_count=%u cluster_size=%u\n", k->abi_version,
          k->topology.sm_count, k->topology.cluster_size);
  fprintf(f,
          "counts: instructions=%u slots=%u comms=%u args=%u input_slots=%u task_coords=%u "
          "handlers=%u primary_handlers=%u operators=%u types=%u\n",
          k->instr_count, k->slot_count, k->comm_count, k->arg_count, k->input_slot_count,
          k->task_coord_count, k->handler_count, k->primary_handler_count, k->operator_count,
          k->type_count);
  fprintf(f, "totals: shared_slot_bytes=%u global_staging_bytes=%u scratch_bytes=%u\n",
          k->shared_slot_bytes, k->global_staging_bytes, k->scratch_bytes);
  for (uint32_t i = 0; i < k->instr_count; i++)
    record(f, "instr", i, &k->instrs[i], df_instr_field_names, DF_INSTR_WORDS);
  for (uint32_t i = 0; i < k->slot_count; i++)
    record(f, "slot", i, &k->slots[i], df_slot_field_names, DF_SLOT_WORDS);
  for (uint32_t i = 0; i < k->comm_count; i++)
    record(f, "comm", i, &k->comms[i], df_comm_field_names, DF_COMM_WORDS);
  for (uint32_t i = 0; i < k->arg_count; i++)
    record(f, "args", i, &k->args[i], df_args_field_names, DF_ARGS_WORDS);
  for (uint32_t s = 0; s < k->topology.sm_count; s++)
    fprintf(f, "queue %u: offset=%u length=%u\n", s, k->queue_offsets[s], k->queue_lengths[s]);
  list(f, "input_slots", k->input_slots, k->input_slot_count);
  list(f, "task_coords", k->task_coords, k->task_coord_count);
  list(f, "pack_order", k->pack_order, k->instr_count);
  for (uint32_t i = 0; i < k->handler_count; i++)
    handler(f, &k->handlers[i]);
  for (uint32_t i = 0; i < k->operator_count; i++)
    fprintf(f, "operator %u: name=%.64s handler_id=%u kind=%s\n", i, k->operators[i].name,
            k->operators[i].index, df_op_kind_name(k->operators[i].kind));
  for (uint32_t i = 0; i < k->type_count; i++)
    fprintf(f, "type %u: name=%.64s index=%u\n", i, k->types[i].name, k->types[i].index);
  barriers(f, &k->barriers);
  launch(f, &k->launch, k->topology.sm_count);
  fprintf(f, "fingerprint=%.64s\n", k->fingerprint[0] ? k->fingerprint : "none");
  if (ferror(f))
    return df_status_errorf(DF_EIO, "plan dump: write error");
  return df_status_ok();
}
