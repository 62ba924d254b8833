/* Validation of a packed plan's tables: handlers, operator and type
   tables, barrier allocation, launch package and fingerprint. */
#include <inttypes.h>

#include "blob_check.h"

#define S DF_SENTINEL
#define fail df_blob_fail

df_status df_blob_fail(const char *fmt, ...) {
  df_status s;
  s.code = DF_EFORMAT;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s.message, sizeof s.message, fmt, ap);
  va_end(ap);
  return s;
}

static df_status check_variant(uint32_t i, const df_handler *h) {
  const df_variant *v = &h->variant;
  if (v->schema_version != DF_VARIANT_SCHEMA_VERSION)
    return fail("handler %u: variant schema_version %u is not %u", i, v->schema_version,
                DF_VARIANT_SCHEMA_VERSION);
  if ((uint32_t)v->base.kind > DF_OPK_FINALIZE)
    return fail("handler %u: variant base operator_kind %u out of range (0..3)", i,
                (uint32_t)v->base.kind);
  bool iter = v->base.kind == DF_OPK_ITER, reduce = v->base.kind == DF_OPK_REDUCE;
  if (v->has_iter != iter)
    return fail("handler %u: variant with base kind %s %s an iter specialization", i,
                df_op_kind_name(v->base.kind), iter ? "lacks" : "has");
  if (v->has_arity != reduce)
    return fail("handler %u: variant with base kind %s %s a reduce arity", i,
                df_op_kind_name(v->base.kind), reduce ? "lacks" : "has");
  if (iter && (uint32_t)v->iter_mode > DF_ITER_EXACT_LENGTH)
    return fail("handler %u: variant iter_mode %u out of range (0..2)", i,
                (uint32_t)v->iter_mode);
  if (iter && (v->iter_mode == DF_ITER_GENERIC) != (v->iter_value == 0))
    return fail("handler %u: variant iter_value %u does not suit iter_mode %s", i,
                v->iter_value, df_blob_iter_mode_name(v->iter_mode));
  if (reduce && (uint32_t)v->arity > DF_ARITY_GENERIC)
    return fail("handler %u: variant arity %u out of range (0..2)", i, (uint32_t)v->arity);
  if (h->has_identity && (v->base.operator_id != h->identity.operator_id ||
                          v->base.kind != h->identity.kind))
    return fail("handler %u: variant base (%u, %s) differs from the identity (%u, %s)", i,
                v->base.operator_id, df_op_kind_name(v->base.kind), h->identity.operator_id,
                df_op_kind_name(h->identity.kind));
  return df_status_ok();
}

static df_status check_handlers(const df_packed *k) {
  if (k->primary_handler_count > k->handler_count)
    return fail("primary_handler_count %u exceeds the %u handlers", k->primary_handler_count,
                k->handler_count);
  uint32_t primaries = 0;
  for (uint32_t i = 0; i < k->handler_count; i++) {
    const df_handler *h = &k->handlers[i];
    if (h->id != i)
      return fail("handler %u: id %u is not its position in the table", i, h->id);
    if ((uint32_t)h->kind > DF_OPK_NONE)
      return fail("handler %u: kind %u out of range (0..4)", i, (uint32_t)h->kind);
    if (!df_blob_str_ok(h->name, sizeof h->name))
      return fail("handler %u: name is not NUL-terminated within %zu bytes", i,
                  sizeof h->name);
    if (!df_blob_str_ok(h->symbol, sizeof h->symbol))
      return fail("handler %u: symbol is not NUL-terminated within %zu bytes", i,
                  sizeof h->symbol);
    if (h->has_identity && (uint32_t)h->identity.kind > DF_OPK_FINALIZE)
      return fail("handler %u: identity operator_kind %u out of range (0..3)", i,
                  (uint32_t)h->identity.kind);
    if (h->has_variant)
      DF_TRY(check_variant(i, h));
    primaries += h->primary;
  }
  if (primaries != k->primary_handler_count)
    return fail("primary_handler_count %u but %u handlers are flagged primary",
                k->primary_handler_count, primaries);
  return df_status_ok();
}

/* Operator or type table: names unique and terminated, kinds in range,
   indices below `bound`. */
static df_status check_named(const char *what, const df_named_index *t, uint32_t n,
                             uint32_t bound, const char *bound_what) {
  for (uint32_t i = 0; i < n; i++) {
    if (!df_blob_str_ok(t[i].name, sizeof t[i].name))
      return fail("%s %u: name is not NUL-terminated within %zu bytes", what, i,
                  sizeof t[i].name);
    if (t[i].index >= bound)
      return fail("%s %u ('%s'): index %u out of range (%u %s)", what, i, t[i].name,
                  t[i].index, bound, bound_what);
    if ((uint32_t)t[i].kind > DF_OPK_NONE)
      return fail("%s %u ('%s'): kind %u out of range (0..4)", what, i, t[i].name,
                  (uint32_t)t[i].kind);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(t[i].name, t[j].name) == 0)
        return fail("%s %u: name '%s' repeats entry %u", what, i, t[i].name, j);
  }
  return df_status_ok();
}

static df_status check_barriers(const df_packed *k) {
  const df_barrier_alloc *b = &k->barriers;
  if (b->slot_count != k->slot_count)
    return fail("barriers: slot_count %u is not the %u slots", b->slot_count, k->slot_count);
  if (b->comm_count != k->comm_count)
    return fail("barriers: comm_count %u is not the %u comms", b->comm_count, k->comm_count);
  if (b->barrier_count != k->launch.barrier_count)
    return fail("barriers: barrier_count %u differs from the launch package's %u",
                b->barrier_count, k->launch.barrier_count);
  if (b->ack_count != k->launch.cluster_ack_count)
    return fail("barriers: ack_count %u differs from the launch package's cluster_ack_count %u",
                b->ack_count, k->launch.cluster_ack_count);
  for (uint32_t i = 0; i < b->slot_count; i++)
    if (b->slot_barrier[i] != S && b->slot_barrier[i] >= b->barrier_count)
      return fail("barriers: slot %u: barrier index %u out of range (%u barriers)", i,
                  b->slot_barrier[i], b->barrier_count);
  for (uint32_t i = 0; i < b->comm_count; i++) {
    if (b->comm_barrier[i] != S && b->comm_barrier[i] >= b->barrier_count)
      return fail("barriers: comm %u: barrier index %u out of range (%u barriers)", i,
                  b->comm_barrier[i], b->barrier_count);
    if (b->comm_ack[i] != S && b->comm_ack[i] >= b->ack_count)
      return fail("barriers: comm %u: ack index %u out of range (%u ACKs)", i, b->comm_ack[i],
                  b->ack_count);
  }
  return df_status_ok();
}

/* Launch-package counts that must equal the packed plan's. */
static df_status check_launch(const df_packed *k) {
  const df_launch_package *l = &k->launch;
  struct {
    const char *field;
    uint32_t have, want;
    const char *what;
  } eq[] = {
      {"abi_version", l->abi_version, DF_ABI_VERSION, "the ABI version"},
      {"sm_count", l->sm_count, k->topology.sm_count, "the topology's"},
      {"cluster_size", l->cluster_size, k->topology.cluster_size, "the topology's"},
      {"slot_count", l->slot_count, k->slot_count, "the slot record count"},
      {"comm_count", l->comm_count, k->comm_count, "the comm record count"},
      {"arg_count", l->arg_count, k->arg_count, "the args record count"},
      {"instruction_count", l->instruction_count, k->instr_count,
       "the instruction record count"},
      {"shared_slot_bytes", l->shared_slot_bytes, k->shared_slot_bytes, "the plan's"},
      {"global_staging_bytes", l->global_staging_bytes, k->global_staging_bytes,
       "the plan's"},
      {"scratch_bytes", l->scratch_bytes, k->scratch_bytes, "the plan's"},
  };
  for (size_t i = 0; i < sizeof eq / sizeof eq[0]; i++)
    if (eq[i].have != eq[i].want)
      return fail("launch: %s %u is not %s %u", eq[i].field, eq[i].have, eq[i].what,
                  eq[i].want);
  uint64_t next = 0;
  for (uint32_t s = 0; s < k->topology.sm_count; s++) {
    if (l->barrier_init_offsets[s] != next)
      return fail("launch: barrier_init_offsets[%u] %u is not %" PRIu64
                  " (lists must be contiguous)",
                  s, l->barrier_init_offsets[s], next);
    next += l->barrier_init_lengths[s];
  }
  if (next != l->barrier_init_count)
    return fail("launch: barrier-init lists cover %" PRIu64 " entries, not barrier_init_count %u",
                next, l->barrier_init_count);
  for (uint32_t i = 0; i < l->barrier_init_count; i++)
    if (l->barrier_init_indices[i] >= l->barrier_count)
      return fail("launch: barrier_init_indices[%u] %u out of range (%u barriers)", i,
                  l->barrier_init_indices[i], l->barrier_count);
  return df_status_ok();
}

static df_status check_fingerprint(const df_packed *k) {
  if (!df_blob_str_ok(k->fingerprint, sizeof k->fingerprint))
    return fail("fingerprint is not NUL-terminated within %zu bytes", sizeof k->fingerprint);
  size_t n = strlen(k->fingerprint);
  if (n != 0 && n != 64)
    return fail("fingerprint has %zu characters, not 64 (or none)", n);
  for (size_t i = 0; i < n; i++) {
    char c = k->fingerprint[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return fail("fingerprint character %zu is not lower-case hex", i);
  }
  return df_status_ok();
}

df_status df_blob_check_tables(const df_packed *k) {
  DF_TRY(check_handlers(k));
  DF_TRY(check_named("operator", k->operators, k->operator_count, k->handler_count,
                     "handlers"));
  DF_TRY(check_named("type", k->types, k->type_count, k->type_count, "types"));
  DF_TRY(check_launch(k));
  DF_TRY(check_barriers(k));
  return check_fingerprint(k);
}

/* The launch package must be exactly what df_launch_package_build
   derives from the records (REFERENCE 5.5): sizes, counts, flags and the
   barrier-init lists. */
df_status df_blob_check_launch_derived(const df_packed *k) {
  const df_launch_package *l = &k->launch;
  df_launch_package d;
  df_status st = df_launch_package_build(k, &d);
  if (df_failed(&st)) {
    if (st.code != DF_ENOMEM)
      st.code = DF_EFORMAT;
    return df_status_wrap(st, "launch");
  }
  for (uint32_t i = 0; i < df_launch_u32_field_count && !df_failed(&st); i++)
    if (df_launch_u32_get(l, i) != df_launch_u32_get(&d, i))
      st = fail("launch: %s %u is not %u (derived from the records)",
                df_launch_u32_fields[i].name, df_launch_u32_get(l, i), df_launch_u32_get(&d, i));
  if (!df_failed(&st) && l->needs_flag_reset != d.needs_flag_reset)
    st = fail("launch: needs_flag_reset %d is not %d (derived from the records)",
              l->needs_flag_reset, d.needs_flag_reset);
  if (!df_failed(&st) && l->barrier_init_count != d.barrier_init_count)
    st = fail("launch: barrier_init_count %u is not %u (derived from the records)",
              l->barrier_init_count, d.barrier_init_count);
  for (uint32_t s = 0; s < k->topology.sm_count && !df_failed(&st); s++)
    if (l->barrier_init_lengths[s] != d.barrier_init_lengths[s])
      st = fail("launch: barrier_init_lengths[%u] %u is not %u (derived from the records)", s,
                l->barrier_init_lengths[s], d.barrier_init_lengths[s]);
  for (uint32_t i = 0; i < l->barrier_init_count && !df_failed(&st); i++)
    if (l->barrier_init_indices[i] != d.barrier_init_indices[i])
      st = fail("launch: barrier_init_indices[%u] %u is not %u (derived from the records)", i,
                l->barrier_init_indices[i], d.barrier_init_indices[i]);
  df_launch_package_free(&d, &k->alloc);
  return st;
}
