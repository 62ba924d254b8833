/* Plan blob reader: checks the container (header, section table,
   alignment, padding, checksum), decodes every section with explicit
   bounds, then validates the decoded plan (blob_check*.c) and program
   (blob_program.c) before handing them out. */
#include <inttypes.h>

#include "blob_check.h"

#define fail df_blob_fail

typedef struct section {
  uint32_t count, offset, length;
  const uint8_t *data;
} section;

/* Size of one record of a fixed-size section; 0 for one-record sections. */
static uint32_t record_bytes(uint32_t id) {
  switch ((df_blob_section)id) {
  case DF_BLOB_SEC_INSTRUCTIONS: return sizeof(df_abi_instr);
  case DF_BLOB_SEC_SLOTS: return sizeof(df_abi_slot);
  case DF_BLOB_SEC_COMMS: return sizeof(df_abi_comm);
  case DF_BLOB_SEC_ARGS: return sizeof(df_abi_args);
  case DF_BLOB_SEC_QUEUE_OFFSETS:
  case DF_BLOB_SEC_QUEUE_LENGTHS:
  case DF_BLOB_SEC_INPUT_SLOTS:
  case DF_BLOB_SEC_TASK_COORDS:
  case DF_BLOB_SEC_PACK_ORDER: return 4;
  case DF_BLOB_SEC_HANDLERS: return DF_BLOB_HANDLER_BYTES;
  case DF_BLOB_SEC_OPERATORS:
  case DF_BLOB_SEC_TYPES: return DF_BLOB_NAMED_BYTES;
  default: return 0;
  }
}

static uint64_t align16(uint64_t x) { return (x + DF_BLOB_ALIGN - 1) / DF_BLOB_ALIGN * DF_BLOB_ALIGN; }

static df_status check_header(const uint8_t *b, size_t len, uint32_t *nsec) {
  const size_t min = DF_BLOB_HEADER_BYTES + DF_BLOB_CHECKSUM_BYTES;
  if (len < min)
    return fail("%zu bytes is shorter than the %zu-byte minimum (header + checksum)", len, min);
  if (memcmp(b, DF_BLOB_MAGIC, DF_BLOB_MAGIC_BYTES) != 0)
    return fail("header: magic is not \"DFPLAN\\0\\1\"");
  uint32_t v = df_le32(b + 8);
  if (v != DF_BLOB_FORMAT_VERSION)
    return fail("header: format version %u is not supported (expected %u)", v,
                DF_BLOB_FORMAT_VERSION);
  v = df_le32(b + 12);
  if (v != DF_ABI_VERSION)
    return fail("header: ABI version %u does not match this build's %u", v, DF_ABI_VERSION);
  v = df_le32(b + 16);
  if (v != DF_BLOB_HEADER_BYTES)
    return fail("header: header size %u is not %u", v, DF_BLOB_HEADER_BYTES);
  *nsec = df_le32(b + 20);
  if (*nsec != DF_BLOB_SEC_LAST - 1 && *nsec != DF_BLOB_SEC_LAST)
    return fail("header: section count %u out of range (%u..%u)", *nsec, DF_BLOB_SEC_LAST - 1,
                DF_BLOB_SEC_LAST);
  uint64_t total = df_le64(b + 24);
  if (total != len)
    return fail("header: total length %" PRIu64 " does not match the %zu bytes given", total,
                len);
  uint64_t table_end = DF_BLOB_HEADER_BYTES + (uint64_t)*nsec * DF_BLOB_ENTRY_BYTES;
  if (table_end > len - DF_BLOB_CHECKSUM_BYTES)
    return fail("header: section table of %u entries extends past the checksum", *nsec);
  uint64_t want = df_le64(b + len - DF_BLOB_CHECKSUM_BYTES);
  uint64_t have = df_blob_checksum(b, len - DF_BLOB_CHECKSUM_BYTES);
  if (want != have)
    return fail("checksum 0x%016" PRIx64 " does not match the contents (0x%016" PRIx64 ")",
                want, have);
  return df_status_ok();
}

static df_status check_padding(const uint8_t *b, uint64_t from, uint64_t to, const char *after) {
  for (uint64_t i = from; i < to; i++)
    if (b[i])
      return fail("padding byte at %" PRIu64 " after %s is not zero", i, after);
  return df_status_ok();
}

/* Section table: ids 1.. in order, each section at the next 16-byte
   boundary, record counts matching lengths, zero padding. */
static df_status read_table(const uint8_t *b, size_t len, uint32_t nsec, section *sec) {
  uint64_t end = DF_BLOB_HEADER_BYTES + (uint64_t)nsec * DF_BLOB_ENTRY_BYTES;
  DF_TRY(check_padding(b, end, align16(end), "the section table"));
  const uint64_t limit = len - DF_BLOB_CHECKSUM_BYTES;
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t *e = b + DF_BLOB_HEADER_BYTES + (size_t)i * DF_BLOB_ENTRY_BYTES;
    uint32_t id = df_le32(e), want_id = i + 1;
    const char *name = df_blob_section_name(want_id);
    if (id != want_id)
      return fail("section table entry %u: id %u, expected %u (%s)", i, id, want_id, name);
    section *s = &sec[id];
    s->count = df_le32(e + 4);
    s->offset = df_le32(e + 8);
    s->length = df_le32(e + 12);
    if (s->offset % DF_BLOB_ALIGN)
      return fail("section %s: offset %u is not 16-byte aligned", name, s->offset);
    if (s->offset < end)
      return fail("section %s: offset %u overlaps the bytes before it (which end at %" PRIu64
                  ")",
                  name, s->offset, end);
    if (s->offset != align16(end))
      return fail("section %s: offset %u leaves a gap after %" PRIu64
                  " (sections are packed at 16-byte alignment)",
                  name, s->offset, end);
    uint64_t s_end = (uint64_t)s->offset + s->length;
    if (s_end > limit)
      return fail("section %s: bytes [%u, %" PRIu64 ") extend past the checksum at %" PRIu64,
                  name, s->offset, s_end, limit);
    DF_TRY(check_padding(b, s_end, align16(s_end) < limit ? align16(s_end) : limit, name));
    uint32_t rec = record_bytes(id);
    if (rec && (uint64_t)s->count * rec != s->length)
      return fail("section %s: length %u is not %u records x %u bytes", name, s->length,
                  s->count, rec);
    if (!rec && s->count != 1)
      return fail("section %s: record count %u is not 1", name, s->count);
    s->data = b + s->offset;
    end = s_end;
  }
  if (align16(end) != limit)
    return fail("%" PRIu64 " bytes between the last section and the checksum (only padding "
                "to 16 is allowed)",
                limit - end);
  return df_status_ok();
}

/* ---- section decoders ----------------------------------------------------- */

static df_status alloc_array(const df_packed *k, void **out, uint64_t n, size_t elem) {
  *out = df_alloc(&k->alloc, (size_t)(n * elem));
  if (!*out)
    return df_status_errorf(DF_ENOMEM, "out of memory decoding %" PRIu64 " records",
                            n);
  return df_status_ok();
}

static df_status get_words(const df_packed *k, const uint8_t *p, uint32_t n, uint32_t **out) {
  DF_TRY(alloc_array(k, (void **)out, n, 4));
  for (uint32_t i = 0; i < n; i++)
    (*out)[i] = df_le32(p + 4 * (size_t)i);
  return df_status_ok();
}

static df_status get_records(const df_packed *k, const section *s, uint32_t words, void **out) {
  DF_TRY(alloc_array(k, out, s->count, (size_t)words * 4));
  uint32_t w[16];
  for (uint32_t i = 0; i < s->count; i++) {
    for (uint32_t j = 0; j < words; j++)
      w[j] = df_le32(s->data + ((size_t)i * words + j) * 4);
    df_words_record((char *)*out + (size_t)i * words * 4, w, words);
  }
  return df_status_ok();
}

/* A fixed-width string field: must hold a NUL; copied zero padded. */
static bool get_str(char *dst, const uint8_t *src, size_t width) {
  const uint8_t *nul = memchr(src, 0, width);
  if (!nul)
    return false;
  memset(dst, 0, width);
  memcpy(dst, src, (size_t)(nul - src));
  return true;
}

/* A string-table reference of record `i`'s field `field`. */
static df_status get_ref(const df_blob_strings *t, uint32_t off, char *dst, size_t width,
                         const char *what, uint32_t i, const char *field) {
  char why[128];
  if (!df_blob_string(t, off, dst, width, why, sizeof why))
    return fail("%s %u: %s: %s", what, i, field, why);
  return df_status_ok();
}

static df_status get_handler(df_handler *h, const uint8_t *p, uint32_t i,
                             const df_blob_strings *t) {
  uint32_t w[DF_BLOB_HANDLER_WORDS];
  for (uint32_t j = 0; j < DF_BLOB_HANDLER_WORDS; j++)
    w[j] = df_le32(p + 4 * j);
  static const struct {
    uint32_t word;
    const char *name;
  } flags[] = {{2, "has_identity"}, {5, "has_variant"}, {9, "has_iter"},
               {12, "has_arity"},   {14, "primary"}};
  for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++)
    if (w[flags[f].word] > 1)
      return fail("handler %u: %s %u is not 0 or 1", i, flags[f].name, w[flags[f].word]);
  /* Absent parts are written as zeros; anything else is corruption. */
  if (!w[2] && (w[3] || w[4]))
    return fail("handler %u: identity fields set but has_identity is 0", i);
  if (!w[5] && (w[6] || w[7] || w[8] || w[9] || w[12]))
    return fail("handler %u: variant fields set but has_variant is 0", i);
  if (!w[9] && (w[10] || w[11]))
    return fail("handler %u: iter fields set but has_iter is 0", i);
  if (!w[12] && w[13])
    return fail("handler %u: arity set but has_arity is 0", i);
  h->id = w[0];
  h->kind = (df_op_kind)w[1];
  h->has_identity = w[2];
  h->identity.operator_id = w[3];
  h->identity.kind = (df_op_kind)w[4];
  h->has_variant = w[5];
  h->variant.base.operator_id = w[6];
  h->variant.base.kind = (df_op_kind)w[7];
  h->variant.schema_version = w[8];
  h->variant.has_iter = w[9];
  h->variant.iter_mode = (df_iter_mode)w[10];
  h->variant.iter_value = w[11];
  h->variant.has_arity = w[12];
  h->variant.arity = (df_arity_class)w[13];
  h->primary = w[14];
  if (w[15]) /* implementation string offset + 1 */
    DF_TRY(get_ref(t, w[15] - 1, h->impl, sizeof h->impl, "handler", i, "implementation"));
  DF_TRY(get_ref(t, w[16], h->name, sizeof h->name, "handler", i, "name"));
  return get_ref(t, w[17], h->symbol, sizeof h->symbol, "handler", i, "symbol");
}

static df_status get_named(const df_packed *k, const section *s, const df_blob_strings *t,
                           const char *what, df_named_index **out) {
  DF_TRY(alloc_array(k, (void **)out, s->count, sizeof **out));
  memset(*out, 0, (size_t)s->count * sizeof **out);
  for (uint32_t i = 0; i < s->count; i++) {
    const uint8_t *p = s->data + (size_t)i * DF_BLOB_NAMED_BYTES;
    df_named_index *n = &(*out)[i];
    DF_TRY(get_ref(t, df_le32(p), n->name, sizeof n->name, what, i, "name"));
    n->index = df_le32(p + 4);
    n->kind = (df_op_kind)df_le32(p + 8);
  }
  return df_status_ok();
}

static df_status get_barriers(df_packed *k, const section *s) {
  df_barrier_alloc *b = &k->barriers;
  const uint64_t head = 4 * DF_BLOB_BARRIER_HEAD_WORDS;
  if (s->length < head)
    return fail("barriers: length %u is shorter than its %" PRIu64 "-byte head", s->length,
                head);
  b->barrier_count = df_le32(s->data);
  uint32_t slots = df_le32(s->data + 4), comms = df_le32(s->data + 8);
  b->ack_count = df_le32(s->data + 12);
  uint64_t want = head + 4 * ((uint64_t)slots + 3 * (uint64_t)comms);
  if (s->length != want)
    return fail("barriers: length %u is not %" PRIu64 " for %u slots and %u comms", s->length,
                want, slots, comms);
  const uint8_t *p = s->data + head;
  DF_TRY(get_words(k, p, slots, &b->slot_barrier));
  b->slot_count = slots;
  p += 4 * (size_t)slots;
  DF_TRY(get_words(k, p, comms, &b->comm_barrier));
  DF_TRY(get_words(k, p + 4 * (size_t)comms, comms, &b->comm_phase));
  DF_TRY(get_words(k, p + 8 * (size_t)comms, comms, &b->comm_ack));
  b->comm_count = comms;
  return df_status_ok();
}

static df_status get_launch(df_packed *k, const section *s) {
  df_launch_package *l = &k->launch;
  const uint32_t n = df_launch_u32_field_count;
  const uint64_t head = 4 * ((uint64_t)n + 2);
  if (s->length < head)
    return fail("launch: length %u is shorter than its %" PRIu64 "-byte head", s->length, head);
  for (uint32_t i = 0; i < n; i++)
    *df_launch_u32(l, i) = df_le32(s->data + 4 * i);
  uint32_t reset = df_le32(s->data + 4 * n);
  if (reset > 1)
    return fail("launch: needs_flag_reset %u is not 0 or 1", reset);
  l->needs_flag_reset = reset;
  uint32_t inits = df_le32(s->data + 4 * n + 4);
  uint32_t sm = k->topology.sm_count;
  uint64_t want = head + 4 * (2 * (uint64_t)sm + inits);
  if (s->length != want)
    return fail("launch: length %u is not %" PRIu64 " for %u queues and %u barrier inits",
                s->length, want, sm, inits);
  const uint8_t *p = s->data + head;
  DF_TRY(get_words(k, p, sm, &l->barrier_init_offsets));
  DF_TRY(get_words(k, p + 4 * (size_t)sm, sm, &l->barrier_init_lengths));
  DF_TRY(get_words(k, p + 8 * (size_t)sm, inits, &l->barrier_init_indices));
  l->barrier_init_count = inits;
  return df_status_ok();
}

static df_status get_topology(df_packed *k, const section *s) {
  if (s->length != 4 * DF_BLOB_TOPOLOGY_WORDS)
    return fail("topology: length %u is not %u", s->length, 4 * DF_BLOB_TOPOLOGY_WORDS);
  uint32_t w[DF_BLOB_TOPOLOGY_WORDS];
  for (uint32_t i = 0; i < DF_BLOB_TOPOLOGY_WORDS; i++)
    w[i] = df_le32(s->data + 4 * i);
  if (w[6] || w[7])
    return fail("topology: reserved words %u, %u are not 0", w[6], w[7]);
  k->topology.sm_count = w[0];
  k->topology.cluster_size = w[1];
  k->shared_slot_bytes = w[2];
  k->global_staging_bytes = w[3];
  k->scratch_bytes = w[4];
  k->primary_handler_count = w[5];
  return df_status_wrap(df_topology_check(&k->topology), "topology");
}

static df_status check_count(const section *s, uint32_t id, uint32_t want, const char *what) {
  if (s[id].count != want)
    return fail("section %s: %u records, expected %u (%s)", df_blob_section_name(id),
                s[id].count, want, what);
  return df_status_ok();
}

static df_status decode(df_packed *k, const section *s, const df_blob_strings *t) {
  DF_TRY(get_topology(k, &s[DF_BLOB_SEC_TOPOLOGY]));
  uint32_t sm = k->topology.sm_count;
  DF_TRY(check_count(s, DF_BLOB_SEC_QUEUE_OFFSETS, sm, "one per SM"));
  DF_TRY(check_count(s, DF_BLOB_SEC_QUEUE_LENGTHS, sm, "one per SM"));
  DF_TRY(check_count(s, DF_BLOB_SEC_PACK_ORDER, s[DF_BLOB_SEC_INSTRUCTIONS].count,
                     "one per instruction"));
  k->instr_count = s[DF_BLOB_SEC_INSTRUCTIONS].count;
  DF_TRY(get_records(k, &s[DF_BLOB_SEC_INSTRUCTIONS], DF_INSTR_WORDS, (void **)&k->instrs));
  DF_TRY(get_words(k, s[DF_BLOB_SEC_PACK_ORDER].data, k->instr_count, &k->pack_order));
  k->slot_count = s[DF_BLOB_SEC_SLOTS].count;
  DF_TRY(get_records(k, &s[DF_BLOB_SEC_SLOTS], DF_SLOT_WORDS, (void **)&k->slots));
  k->comm_count = s[DF_BLOB_SEC_COMMS].count;
  DF_TRY(get_records(k, &s[DF_BLOB_SEC_COMMS], DF_COMM_WORDS, (void **)&k->comms));
  k->arg_count = s[DF_BLOB_SEC_ARGS].count;
  DF_TRY(get_records(k, &s[DF_BLOB_SEC_ARGS], DF_ARGS_WORDS, (void **)&k->args));
  DF_TRY(get_words(k, s[DF_BLOB_SEC_QUEUE_OFFSETS].data, sm, &k->queue_offsets));
  DF_TRY(get_words(k, s[DF_BLOB_SEC_QUEUE_LENGTHS].data, sm, &k->queue_lengths));
  k->input_slot_count = s[DF_BLOB_SEC_INPUT_SLOTS].count;
  DF_TRY(get_words(k, s[DF_BLOB_SEC_INPUT_SLOTS].data, k->input_slot_count, &k->input_slots));
  k->task_coord_count = s[DF_BLOB_SEC_TASK_COORDS].count;
  DF_TRY(get_words(k, s[DF_BLOB_SEC_TASK_COORDS].data, k->task_coord_count, &k->task_coords));

  const section *hs = &s[DF_BLOB_SEC_HANDLERS];
  DF_TRY(alloc_array(k, (void **)&k->handlers, hs->count, sizeof *k->handlers));
  memset(k->handlers, 0, (size_t)hs->count * sizeof *k->handlers);
  k->handler_count = hs->count;
  for (uint32_t i = 0; i < hs->count; i++)
    DF_TRY(get_handler(&k->handlers[i], hs->data + (size_t)i * DF_BLOB_HANDLER_BYTES, i, t));
  k->operator_count = s[DF_BLOB_SEC_OPERATORS].count;
  DF_TRY(get_named(k, &s[DF_BLOB_SEC_OPERATORS], t, "operator", &k->operators));
  k->type_count = s[DF_BLOB_SEC_TYPES].count;
  DF_TRY(get_named(k, &s[DF_BLOB_SEC_TYPES], t, "type", &k->types));
  DF_TRY(get_barriers(k, &s[DF_BLOB_SEC_BARRIERS]));
  DF_TRY(get_launch(k, &s[DF_BLOB_SEC_LAUNCH]));

  const section *fp = &s[DF_BLOB_SEC_FINGERPRINT];
  if (fp->length != DF_BLOB_FINGERPRINT_BYTES)
    return fail("fingerprint: length %u is not %u", fp->length, DF_BLOB_FINGERPRINT_BYTES);
  if (!get_str(k->fingerprint, fp->data, sizeof k->fingerprint))
    return fail("fingerprint is not NUL-terminated within %zu bytes", sizeof k->fingerprint);
  return df_blob_check_packed(k);
}

df_status df_blob_read(const uint8_t *bytes, size_t len, const df_allocator *alloc,
                       df_packed **out, df_program **prog_out) {
  *out = NULL;
  if (prog_out)
    *prog_out = NULL;
  if (!bytes)
    len = 0;
  uint32_t nsec = 0;
  section sec[DF_BLOB_SEC_LAST + 1];
  df_blob_strings strings;
  memset(sec, 0, sizeof sec);
  DF_TRY(df_status_wrap(check_header(bytes, len, &nsec), "plan blob"));
  DF_TRY(df_status_wrap(read_table(bytes, len, nsec, sec), "plan blob"));

  df_allocator a = df_allocator_or_default(alloc);
  df_packed *k = df_alloc(&a, sizeof *k);
  if (!k)
    return df_status_errorf(DF_ENOMEM, "plan blob: out of memory");
  memset(k, 0, sizeof *k);
  k->alloc = a;
  k->abi_version = df_le32(bytes + 12);
  df_program *prog = NULL;
  strings.data = sec[DF_BLOB_SEC_STRINGS].data;
  strings.len = sec[DF_BLOB_SEC_STRINGS].length;
  df_status s = decode(k, sec, &strings);
  /* The program is validated even when the caller does not want it. */
  if (!df_failed(&s) && nsec == DF_BLOB_SEC_PROGRAM) {
    const section *ps = &sec[DF_BLOB_SEC_PROGRAM];
    s = df_status_wrap(df_blob_get_program(ps->data, ps->length, &strings, &a, &prog), "program");
  }
  if (df_failed(&s)) {
    if (s.code != DF_ENOMEM)
      s.code = DF_EFORMAT;
    df_packed_destroy(k);
    return df_status_wrap(s, "plan blob");
  }
  *out = k;
  if (prog_out)
    *prog_out = prog;
  else
    df_program_destroy(prog);
  return df_status_ok();
}
