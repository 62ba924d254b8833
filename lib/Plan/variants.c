/* Handler variant keys: iter-range and reduce-arity specialisations, their
   validation, ordering and selection (REFERENCE 1.5, 1.6). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/plan.h"

static const char *const iter_mode_names[] = {"generic", "tile_count", "exact_length"};
static const char *const arity_names[] = {"passthrough", "binary", "generic"};

const char *df_iter_mode_name(df_iter_mode m) {
  return (unsigned)m < 3 ? iter_mode_names[m] : "invalid";
}

const char *df_arity_class_name(df_arity_class c) {
  return (unsigned)c < 3 ? arity_names[c] : "invalid";
}

df_status df_iter_mode_parse(const char *name, df_iter_mode *out) {
  for (int i = 0; i < 3; i++)
    if (name && strcmp(name, iter_mode_names[i]) == 0) {
      *out = (df_iter_mode)i;
      return df_status_ok();
    }
  return df_status_errorf(DF_EINVAL,
                          "Unsupported Dataflow ITER specialization mode '%s'; expected one "
                          "of: exact_length, generic, tile_count",
                          name ? name : "None");
}

df_status df_iter_spec_check(df_iter_mode mode, bool has_value, int64_t value) {
  if ((unsigned)mode > DF_ITER_EXACT_LENGTH)
    return df_status_errorf(DF_EINVAL,
                            "Unsupported Dataflow ITER specialization mode %d; expected one "
                            "of: exact_length, generic, tile_count",
                            (int)mode);
  if (mode == DF_ITER_GENERIC) {
    if (has_value)
      return df_status_errorf(DF_EINVAL,
                              "generic Dataflow ITER specialization cannot have a value, "
                              "got %lld",
                              (long long)value);
    return df_status_ok();
  }
  if (!has_value)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow ITER specialization '%s' requires a positive integer "
                            "value, got None",
                            df_iter_mode_name(mode));
  if (value <= 0 || value > (int64_t)UINT32_MAX)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow ITER specialization '%s' requires a positive integer "
                            "value, got %lld",
                            df_iter_mode_name(mode), (long long)value);
  return df_status_ok();
}

df_status df_arity_class_for(bool has_arity, int64_t arity, df_arity_class *out) {
  if (!has_arity) {
    *out = DF_ARITY_GENERIC;
    return df_status_ok();
  }
  if (arity <= 0)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow reduce arity must be a positive integer or None, got "
                            "%lld",
                            (long long)arity);
  *out = arity == 1 ? DF_ARITY_PASSTHROUGH : arity == 2 ? DF_ARITY_BINARY : DF_ARITY_GENERIC;
  return df_status_ok();
}

/* Python-style tuple of specialisation kinds, e.g. ('iter_range',). */
static const char *kinds_tuple(bool iter, bool arity) {
  if (iter && arity)
    return "('iter_range', 'reduce_arity')";
  if (iter)
    return "('iter_range',)";
  if (arity)
    return "('reduce_arity',)";
  return "()";
}

df_status df_variant_check(const df_variant *v) {
  if (v->schema_version != DF_VARIANT_SCHEMA_VERSION)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler variant schema_version must be %u, got %u",
                            DF_VARIANT_SCHEMA_VERSION, v->schema_version);
  df_op_kind k = v->base.kind;
  if ((unsigned)k > DF_OPK_FINALIZE)
    return df_status_errorf(DF_EINVAL,
                            "Unsupported Dataflow handler operator_kind '%s'; expected one "
                            "of: finalize, iter, map, reduce",
                            df_op_kind_name(k));
  bool want_iter = k == DF_OPK_ITER, want_arity = k == DF_OPK_REDUCE;
  if (v->has_iter != want_iter || v->has_arity != want_arity)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler variant specialization kinds do not match base "
                            "identity: operator_kind=%s, expected=%s, got=%s",
                            df_op_kind_name(k), kinds_tuple(want_iter, want_arity),
                            kinds_tuple(v->has_iter, v->has_arity));
  if (v->has_iter)
    DF_TRY(df_iter_spec_check(v->iter_mode, v->iter_mode != DF_ITER_GENERIC || v->iter_value,
                              v->iter_value));
  if (v->has_arity && (unsigned)v->arity > DF_ARITY_GENERIC)
    return df_status_errorf(DF_EINVAL, "Unsupported Dataflow reduce arity class %d",
                            (int)v->arity);
  return df_status_ok();
}

df_status df_variant_default(df_identity base, int64_t reduce_arity, df_variant *out) {
  memset(out, 0, sizeof *out);
  out->base = base;
  out->schema_version = DF_VARIANT_SCHEMA_VERSION;
  if (base.kind == DF_OPK_ITER) {
    out->has_iter = true;
    out->iter_mode = DF_ITER_GENERIC;
  } else if (base.kind == DF_OPK_REDUCE) {
    out->has_arity = true;
    DF_TRY(df_arity_class_for(reduce_arity > 0, reduce_arity, &out->arity));
  }
  return df_variant_check(out);
}

bool df_variant_equal(const df_variant *a, const df_variant *b) {
  return df_variant_compare(a, b) == 0;
}

static int cmp_u32(uint32_t a, uint32_t b) { return (a > b) - (a < b); }

/* Canonical key order: (schema, (operator_id, kind name), specs), specs
   sorted by kind name: "iter_range" < "reduce_arity"; a missing spec list
   entry sorts first, like a shorter tuple. */
int df_variant_compare(const df_variant *a, const df_variant *b) {
  int c = cmp_u32(a->schema_version, b->schema_version);
  if (!c)
    c = cmp_u32(a->base.operator_id, b->base.operator_id);
  if (!c)
    c = strcmp(df_op_kind_name(a->base.kind), df_op_kind_name(b->base.kind));
  if (c)
    return c < 0 ? -1 : 1;
  /* first spec: iter_range if present, else reduce_arity */
  int ka = a->has_iter ? 1 : a->has_arity ? 2 : 0;
  int kb = b->has_iter ? 1 : b->has_arity ? 2 : 0;
  if (ka != kb)
    return ka < kb ? -1 : 1;
  if (a->has_iter) {
    c = strcmp(df_iter_mode_name(a->iter_mode), df_iter_mode_name(b->iter_mode));
    if (c)
      return c < 0 ? -1 : 1;
    uint32_t va = a->iter_mode == DF_ITER_GENERIC ? 0 : a->iter_value;
    uint32_t vb = b->iter_mode == DF_ITER_GENERIC ? 0 : b->iter_value;
    if ((c = cmp_u32(va, vb)))
      return c;
    if (a->has_arity != b->has_arity)
      return a->has_arity ? 1 : -1;
  }
  if (a->has_arity) {
    c = strcmp(df_arity_class_name(a->arity), df_arity_class_name(b->arity));
    if (c)
      return c < 0 ? -1 : 1;
  }
  return 0;
}

uint32_t df_variant_fixed_extent(const df_variant *v, uint32_t bucket_size) {
  if (!v->has_iter)
    return 0;
  if (v->iter_mode == DF_ITER_EXACT_LENGTH)
    return v->iter_value;
  if (v->iter_mode == DF_ITER_TILE_COUNT)
    return v->iter_value * bucket_size;
  return 0;
}

int df_variant_diag_name(const df_variant *v, const char *base, char *buf, size_t cap) {
  if (v->has_iter && v->iter_mode == DF_ITER_TILE_COUNT)
    return snprintf(buf, cap, "%s__dataflow_iter_tiles_%u", base, v->iter_value);
  if (v->has_iter && v->iter_mode == DF_ITER_EXACT_LENGTH)
    return snprintf(buf, cap, "%s__dataflow_iter_len_%u", base, v->iter_value);
  return snprintf(buf, cap, "%s", base);
}

/* ---- option lists ---------------------------------------------------- */

/* Copy `text[0..n)` trimmed and lower-cased into tok (cap 32). */
static void token(const char *text, size_t n, char tok[32]) {
  while (n && isspace((unsigned char)*text))
    text++, n--;
  while (n && isspace((unsigned char)text[n - 1]))
    n--;
  if (n > 31)
    n = 31;
  for (size_t i = 0; i < n; i++)
    tok[i] = (char)tolower((unsigned char)text[i]);
  tok[n] = '\0';
}

static bool none_like(const char *text) {
  char tok[32];
  if (!text)
    return true;
  token(text, strlen(text), tok);
  return !tok[0] || !strcmp(tok, "0") || !strcmp(tok, "false") || !strcmp(tok, "none") ||
         !strcmp(tok, "off");
}

static int cmp_u32_qsort(const void *a, const void *b) {
  return cmp_u32(*(const uint32_t *)a, *(const uint32_t *)b);
}

/* Sort and de-duplicate values[0..*count). */
static void sort_unique(uint32_t *values, uint32_t *count) {
  qsort(values, *count, sizeof *values, cmp_u32_qsort);
  uint32_t n = 0;
  for (uint32_t i = 0; i < *count; i++)
    if (n == 0 || values[n - 1] != values[i])
      values[n++] = values[i];
  *count = n;
}

/* Parse a comma list of positive ints (and "generic" when allowed). */
static df_status parse_list(const char *text, const char *what, bool allow_generic,
                            uint32_t *values, uint32_t *count, bool *generic) {
  *count = 0;
  const char *p = text;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char tok[32];
    token(p, n, tok);
    if (allow_generic && strcmp(tok, "generic") == 0) {
      *generic = true;
    } else {
      char *stop = NULL;
      unsigned long long v = tok[0] && isdigit((unsigned char)tok[0]) ? strtoull(tok, &stop, 10) : 0;
      if (!stop || *stop || v == 0 || v > UINT32_MAX)
        return df_status_errorf(DF_EINVAL,
                                "Dataflow %s entries must be positive integers%s, got '%.*s'",
                                what, allow_generic ? " or 'generic'" : "", (int)(n > 40 ? 40 : n),
                                p);
      if (*count == 64)
        return df_status_errorf(DF_EINVAL, "Dataflow %s has more than 64 entries", what);
      values[(*count)++] = (uint32_t)v;
    }
    if (!end)
      break;
    p = end + 1;
  }
  sort_unique(values, count);
  return df_status_ok();
}

df_status df_iter_buckets_parse(const char *text, df_iter_buckets *out) {
  memset(out, 0, sizeof *out);
  if (none_like(text))
    return df_status_ok();
  char tok[32];
  token(text, strlen(text), tok);
  out->enabled = true;
  out->generic = true;
  if (strcmp(tok, "auto") == 0) {
    out->count = 3;
    out->values[0] = 1, out->values[1] = 2, out->values[2] = 4;
    return df_status_ok();
  }
  bool generic = false;
  df_status s = parse_list(text, "iter_range_buckets", true, out->values, &out->count, &generic);
  if (df_failed(&s))
    memset(out, 0, sizeof *out);
  return s;
}

df_status df_exact_lengths_parse(const char *text, df_exact_lengths *out) {
  memset(out, 0, sizeof *out);
  if (none_like(text))
    return df_status_ok();
  df_status s = parse_list(text, "iter_range_exact_lengths", false, out->values, &out->count,
                           NULL);
  if (df_failed(&s))
    memset(out, 0, sizeof *out);
  return s;
}

static bool sorted_contains(const uint32_t *v, uint32_t n, uint32_t x) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (v[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && v[lo] == x;
}

void df_iter_select(uint32_t length, const df_iter_buckets *buckets, uint32_t bucket_size,
                    const df_exact_lengths *exact, df_iter_mode *mode, uint32_t *value) {
  *mode = DF_ITER_GENERIC;
  *value = 0;
  if (exact && sorted_contains(exact->values, exact->count, length)) {
    *mode = DF_ITER_EXACT_LENGTH;
    *value = length;
    return;
  }
  if (!buckets || !buckets->enabled || bucket_size == 0 || length % bucket_size)
    return;
  uint32_t n = length / bucket_size;
  if (sorted_contains(buckets->values, buckets->count, n)) {
    *mode = DF_ITER_TILE_COUNT;
    *value = n;
  }
}
