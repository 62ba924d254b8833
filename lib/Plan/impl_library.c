/* df's built-in handler library: which implementations each library
   handler offers, what it needs of the operator's intermediate, and the
   descriptor words its device code reads (lib/Runtime/device/library.c). */
#include <stdio.h>
#include <string.h>

#include "df/impl.h"

typedef struct lib_entry {
  const char *library;
  const char *symbol;
  df_op_kind kind;
  bool has_arity;
  df_arity_class arity;
  bool general;
} lib_entry;

static const lib_entry entries[] = {
    {"lse_combine", "df_lib_lse_combine_passthrough", DF_OPK_REDUCE, true, DF_ARITY_PASSTHROUGH,
     false},
    {"lse_combine", "df_lib_lse_combine_binary", DF_OPK_REDUCE, true, DF_ARITY_BINARY, false},
    {"lse_combine", "df_lib_lse_combine_generic", DF_OPK_REDUCE, false, DF_ARITY_GENERIC, true},
    {"copy", "df_lib_copy", DF_OPK_FINALIZE, false, DF_ARITY_GENERIC, true},
};
enum { ENTRY_COUNT = sizeof entries / sizeof entries[0] };

const char *df_library_names(void) { return "lse_combine, copy"; }

static bool known(const char *library, df_op_kind *kind) {
  for (int i = 0; i < ENTRY_COUNT; i++)
    if (strcmp(entries[i].library, library) == 0) {
      if (kind)
        *kind = entries[i].kind;
      return true;
    }
  return false;
}

uint32_t df_library_impls(const char *library, const char *op, df_impl *out, uint32_t cap) {
  uint32_t n = 0;
  for (int i = 0; i < ENTRY_COUNT; i++) {
    const lib_entry *e = &entries[i];
    if (strcmp(e->library, library) != 0)
      continue;
    if (n < cap) {
      df_impl *im = &out[n];
      memset(im, 0, sizeof *im);
      snprintf(im->name, sizeof im->name, "%s", e->symbol);
      snprintf(im->op, sizeof im->op, "%s", op);
      snprintf(im->library, sizeof im->library, "%s", library);
      im->origin = DF_IMPL_BUILTIN;
      im->has_arity = e->has_arity;
      im->arity = e->arity;
      im->general = e->general;
    }
    n++;
  }
  return n;
}

const char *df_library_of_symbol(const char *symbol) {
  for (int i = 0; i < ENTRY_COUNT; i++)
    if (strcmp(entries[i].symbol, symbol) == 0)
      return entries[i].library;
  return NULL;
}

static int32_t field_index(const df_itype *t, const char *name) {
  for (uint32_t i = 0; i < t->field_count; i++)
    if (strcmp(t->fields[i].name, name) == 0)
      return (int32_t)i;
  return -1;
}

static bool payload_dtype(df_dtype d) {
  return d == DF_DTYPE_FLOAT16 || d == DF_DTYPE_BFLOAT16 || d == DF_DTYPE_FLOAT32;
}

/* The {lse, o} layout both library handlers read. */
static df_status check_fields(const char *library, const char *op, const df_itype *t,
                              bool need_lse) {
  int32_t o = field_index(t, "o"), l = field_index(t, "lse");
  if (o < 0 || (need_lse && l < 0))
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' uses built-in handler '%s', which needs intermediate "
                            "'%s' to have %s",
                            op, library, t->name,
                            need_lse ? "fields 'lse' (float32) and 'o'" : "a field 'o'");
  const df_field *fo = &t->fields[o];
  if (!payload_dtype(fo->dtype))
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' uses built-in handler '%s': field '%s.o' must be "
                            "float16, bfloat16 or float32, not %s",
                            op, library, t->name, df_dtype_name(fo->dtype));
  if (!need_lse)
    return df_status_ok();
  const df_field *fl = &t->fields[l];
  if (fl->dtype != DF_DTYPE_FLOAT32 || fl->rank > 1)
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' uses built-in handler '%s': field '%s.lse' must be a "
                            "float32 scalar or vector (one per head)",
                            op, library, t->name);
  uint32_t heads = df_field_elements(fl), elems = df_field_elements(fo);
  if (heads == 0 || elems % heads != 0)
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' uses built-in handler '%s': field '%s.o' has %u "
                            "elements, not a multiple of the %u heads of '%s.lse'",
                            op, library, t->name, elems, heads, t->name);
  return df_status_ok();
}

df_status df_library_check(const char *library, const char *op, df_op_kind kind,
                           const df_itype *t) {
  df_op_kind want;
  if (!known(library, &want))
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' names built-in handler '%s', which df does not "
                            "have (built-in handlers: %s)",
                            op, library, df_library_names());
  if (kind != want)
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' is a %s but built-in handler '%s' implements a %s",
                            op, df_op_kind_name(kind), library, df_op_kind_name(want));
  if (!t)
    return df_status_errorf(DF_EINVAL,
                            "operator '%s' uses built-in handler '%s' but has no intermediate "
                            "parameter",
                            op, library);
  return check_fields(library, op, t, strcmp(library, "lse_combine") == 0);
}

/* The intermediate an operator consumes (its first INTER/INTER_LIST). */
static const df_itype *consumed(const df_program *p, const df_operator *o) {
  for (uint32_t i = 0; i < o->param_count; i++)
    if ((o->params[i].kind == DF_PARAM_INTER || o->params[i].kind == DF_PARAM_INTER_LIST) &&
        o->params[i].type >= 0 && (uint32_t)o->params[i].type < p->type_count)
      return &p->types[o->params[i].type];
  return NULL;
}

/* Index of the operator's first tensor parameter among the program's
   tensor arguments (through the calling stage's binding). */
static df_status output_tensor(const df_program *p, int32_t op, uint32_t *index) {
  const df_operator *o = &p->ops[op];
  for (uint32_t s = 0; s < p->stage_count; s++) {
    if (p->stages[s].op != op)
      continue;
    for (uint32_t j = 0; j < o->param_count; j++) {
      if (o->params[j].kind != DF_PARAM_TENSOR)
        continue;
      const char *bound = df_stage_binding(&p->stages[s], o->params[j].name);
      const char *name = bound ? bound : o->params[j].name;
      const char *args[64];
      uint32_t n = df_program_tensor_args(p, args, 64);
      for (uint32_t k = 0; k < n && k < 64; k++)
        if (strcmp(args[k], name) == 0) {
          *index = k;
          return df_status_ok();
        }
    }
  }
  return df_status_errorf(DF_EINVAL,
                          "operator '%s' uses built-in handler 'copy', which needs a tensor "
                          "parameter to write (called by some stage)",
                          o->name);
}

df_status df_library_descriptor(const char *library, const df_program *p, const char *op,
                                uint32_t words[8], uint32_t *count) {
  int32_t oi = df_program_find_operator(p, op);
  if (oi < 0)
    return df_status_errorf(DF_EINVAL, "built-in handler '%s': the program has no operator '%s'",
                            library, op);
  const df_operator *o = &p->ops[oi];
  const df_itype *t = consumed(p, o);
  DF_TRY(df_library_check(library, op, o->kind, t));
  memset(words, 0, sizeof(uint32_t) * 8);
  uint32_t fo = (uint32_t)field_index(t, "o");
  const df_field *po = &t->fields[fo];
  uint32_t code = po->dtype == DF_DTYPE_FLOAT16 ? 0 : po->dtype == DF_DTYPE_BFLOAT16 ? 1 : 2;
  if (strcmp(library, "lse_combine") == 0) {
    uint32_t fl = (uint32_t)field_index(t, "lse");
    uint32_t heads = df_field_elements(&t->fields[fl]);
    words[0] = df_itype_field_offset(t, fl);
    words[1] = heads;
    words[2] = df_itype_field_offset(t, fo);
    words[3] = code;
    words[4] = df_field_elements(po) / heads;
    *count = 5;
    return df_status_ok();
  }
  words[0] = df_itype_field_offset(t, fo);
  words[1] = code;
  words[2] = df_field_elements(po);
  DF_TRY(output_tensor(p, oi, &words[3]));
  *count = 4;
  return df_status_ok();
}
