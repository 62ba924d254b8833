/* JSON dump of a packed plan with the reference's key names (REFERENCE
   5.3-5.5); records as objects keyed by the abi.h field names. */
#include <stdio.h>

#include "blob_format.h"

/* A JSON string from a fixed-width name: stops at the NUL or `width`,
   escapes quotes, backslashes and control bytes. */
static void str(FILE *f, const char *s, size_t width) {
  fputc('"', f);
  for (size_t i = 0; i < width && s[i]; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void key(FILE *f, bool *first, const char *k) {
  fprintf(f, "%s\"%s\":", *first ? "" : ",", k);
  *first = false;
}

static void array(FILE *f, const uint32_t *v, uint32_t n) {
  fputc('[', f);
  for (uint32_t i = 0; i < n; i++)
    fprintf(f, "%s%u", i ? "," : "", v[i]);
  fputc(']', f);
}

static void records(FILE *f, const void *recs, uint32_t count, const char *const *names,
                    uint32_t words) {
  uint32_t w[16];
  fputc('[', f);
  for (uint32_t i = 0; i < count; i++) {
    df_record_words((const char *)recs + (size_t)i * words * 4, w, words);
    fputs(i ? ",{" : "{", f);
    for (uint32_t j = 0; j < words; j++)
      fprintf(f, "%s\"%s\":%u", j ? "," : "", names[j], w[j]);
    fputc('}', f);
  }
  fputc(']', f);
}

/* Identity or variant JSON through the canonical writers. */
static df_status canonical(FILE *f, const df_handler *h, bool variant) {
  char buf[512];
  int n = variant ? df_variant_to_json(&h->variant, buf, sizeof buf)
                  : df_identity_to_json(&h->identity, buf, sizeof buf);
  if (n < 0 || (size_t)n >= sizeof buf)
    return df_status_errorf(DF_EINTERNAL, "plan dump: handler %u %s JSON does not fit %zu bytes",
                            h->id, variant ? "variant" : "identity", sizeof buf);
  fputs(buf, f);
  return df_status_ok();
}

static df_status handlers(FILE *f, const df_packed *k, bool *first) {
  key(f, first, "handler_identities");
  fputc('[', f);
  for (uint32_t i = 0; i < k->handler_count; i++) {
    if (i)
      fputc(',', f);
    if (k->handlers[i].has_identity)
      DF_TRY(canonical(f, &k->handlers[i], false));
    else
      fputs("null", f);
  }
  fputc(']', f);
  key(f, first, "handler_variant_keys");
  fputc('[', f);
  for (uint32_t i = 0; i < k->handler_count; i++) {
    if (i)
      fputc(',', f);
    if (k->handlers[i].has_variant)
      DF_TRY(canonical(f, &k->handlers[i], true));
    else
      fputs("null", f);
  }
  fputc(']', f);
  key(f, first, "handlers");
  fputc('[', f);
  for (uint32_t i = 0; i < k->handler_count; i++) {
    const df_handler *h = &k->handlers[i];
    fprintf(f, "%s{\"id\":%u,\"name\":", i ? "," : "", h->id);
    str(f, h->name, sizeof h->name);
    fprintf(f, ",\"kind\":\"%s\",\"primary\":%s,\"symbol\":", df_op_kind_name(h->kind),
            h->primary ? "true" : "false");
    str(f, h->symbol, sizeof h->symbol);
    if (h->impl[0]) {
      fputs(",\"impl\":", f);
      str(f, h->impl, sizeof h->impl);
    }
    fputc('}', f);
  }
  fputc(']', f);
  key(f, first, "primary_handler_count");
  fprintf(f, "%u", k->primary_handler_count);
  return df_status_ok();
}

/* {name: index} or {name: kind} of a named table. */
static void table(FILE *f, const df_named_index *t, uint32_t n, bool kinds) {
  fputc('{', f);
  for (uint32_t i = 0; i < n; i++) {
    if (i)
      fputc(',', f);
    str(f, t[i].name, sizeof t[i].name);
    if (kinds)
      fprintf(f, ":\"%s\"", df_op_kind_name(t[i].kind));
    else
      fprintf(f, ":%u", t[i].index);
  }
  fputc('}', f);
}

static void barriers(FILE *f, const df_barrier_alloc *b) {
  fprintf(f, "{\"barrier_count\":%u,\"slot_barrier_indices\":", b->barrier_count);
  array(f, b->slot_barrier, b->slot_count);
  fputs(",\"comm_barrier_indices\":", f);
  array(f, b->comm_barrier, b->comm_count);
  fputs(",\"comm_barrier_phases\":", f);
  array(f, b->comm_phase, b->comm_count);
  fputs(",\"comm_ack_indices\":", f);
  array(f, b->comm_ack, b->comm_count);
  fprintf(f, ",\"ack_count\":%u}", b->ack_count);
}

static void launch(FILE *f, const df_launch_package *l, uint32_t sm_count) {
  fputc('{', f);
  for (uint32_t i = 0; i < df_launch_u32_field_count; i++)
    fprintf(f, "%s\"%s\":%u", i ? "," : "", df_launch_u32_fields[i].name,
            df_launch_u32_get(l, i));
  fprintf(f, ",\"needs_flag_reset\":%s,\"barrier_init_offsets\":",
          l->needs_flag_reset ? "true" : "false");
  array(f, l->barrier_init_offsets, sm_count);
  fputs(",\"barrier_init_lengths\":", f);
  array(f, l->barrier_init_lengths, sm_count);
  fprintf(f, ",\"barrier_init_count\":%u,\"barrier_init_indices\":", l->barrier_init_count);
  array(f, l->barrier_init_indices, l->barrier_init_count);
  fputc('}', f);
}

df_status df_packed_dump_json(const df_packed *k, FILE *f) {
  if (!k || !f)
    return df_status_errorf(DF_EINVAL, "plan dump: no packed plan or no output");
  bool first = true;
  fputc('{', f);
  key(f, &first, "abi_version");
  fprintf(f, "%u", k->abi_version);
  key(f, &first, "topology");
  fprintf(f, "{\"sm_count\":%u,\"cluster_size\":%u}", k->topology.sm_count,
          k->topology.cluster_size);
  key(f, &first, "instruction_record_size");
  fprintf(f, "%zu", sizeof(df_abi_instr));
  key(f, &first, "slot_record_size");
  fprintf(f, "%zu", sizeof(df_abi_slot));
  key(f, &first, "comm_record_size");
  fprintf(f, "%zu", sizeof(df_abi_comm));
  key(f, &first, "arg_record_size");
  fprintf(f, "%zu", sizeof(df_abi_args));
  key(f, &first, "operator_table");
  table(f, k->operators, k->operator_count, false);
  key(f, &first, "operator_kinds");
  table(f, k->operators, k->operator_count, true);
  DF_TRY(handlers(f, k, &first));
  key(f, &first, "intermediate_type_table");
  table(f, k->types, k->type_count, false);
  key(f, &first, "queue_offsets");
  array(f, k->queue_offsets, k->topology.sm_count);
  key(f, &first, "queue_lengths");
  array(f, k->queue_lengths, k->topology.sm_count);
  key(f, &first, "input_slots");
  array(f, k->input_slots, k->input_slot_count);
  key(f, &first, "task_coords");
  array(f, k->task_coords, k->task_coord_count);
  key(f, &first, "pack_order");
  array(f, k->pack_order, k->instr_count);
  key(f, &first, "instructions");
  records(f, k->instrs, k->instr_count, df_instr_field_names, DF_INSTR_WORDS);
  key(f, &first, "slots");
  records(f, k->slots, k->slot_count, df_slot_field_names, DF_SLOT_WORDS);
  key(f, &first, "comms");
  records(f, k->comms, k->comm_count, df_comm_field_names, DF_COMM_WORDS);
  key(f, &first, "args");
  records(f, k->args, k->arg_count, df_args_field_names, DF_ARGS_WORDS);
  key(f, &first, "barrier_allocation");
  barriers(f, &k->barriers);
  key(f, &first, "shared_slot_bytes");
  fprintf(f, "%u", k->shared_slot_bytes);
  key(f, &first, "global_staging_bytes");
  fprintf(f, "%u", k->global_staging_bytes);
  key(f, &first, "scratch_bytes");
  fprintf(f, "%u", k->scratch_bytes);
  key(f, &first, "launch_package");
  launch(f, &k->launch, k->topology.sm_count);
  key(f, &first, "fingerprint");
  str(f, k->fingerprint, sizeof k->fingerprint - 1);
  fputs("}\n", f);
  if (ferror(f))
    return df_status_errorf(DF_EIO, "plan dump: write error");
  return df_status_ok();
}
