/* Element types of intermediate fields and slot byte sizes (REFERENCE 1.4). */
#include <ctype.h>
#include <string.h>

#include "df/abi.h"
#include "df/program.h"

typedef struct dtype_info {
  const char *name;
  uint32_t bytes;
  uint32_t code;
} dtype_info;

static const dtype_info infos[DF_DTYPE_COUNT] = {
    [DF_DTYPE_INVALID] = {"invalid", 0, DF_TENSOR_DTYPE_UNKNOWN},
    [DF_DTYPE_BOOL] = {"bool", 1, DF_TENSOR_DTYPE_BOOL},
    [DF_DTYPE_INT8] = {"int8", 1, DF_TENSOR_DTYPE_INT},
    [DF_DTYPE_INT16] = {"int16", 2, DF_TENSOR_DTYPE_INT},
    [DF_DTYPE_INT32] = {"int32", 4, DF_TENSOR_DTYPE_INT},
    [DF_DTYPE_INT64] = {"int64", 8, DF_TENSOR_DTYPE_INT},
    [DF_DTYPE_UINT8] = {"uint8", 1, DF_TENSOR_DTYPE_UINT},
    [DF_DTYPE_UINT16] = {"uint16", 2, DF_TENSOR_DTYPE_UINT},
    [DF_DTYPE_UINT32] = {"uint32", 4, DF_TENSOR_DTYPE_UINT},
    [DF_DTYPE_UINT64] = {"uint64", 8, DF_TENSOR_DTYPE_UINT},
    [DF_DTYPE_FLOAT16] = {"float16", 2, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_BFLOAT16] = {"bfloat16", 2, DF_TENSOR_DTYPE_BFLOAT},
    [DF_DTYPE_FLOAT32] = {"float32", 4, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_FLOAT64] = {"float64", 8, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_FLOAT8_E4M3] = {"float8_e4m3", 1, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_FLOAT8_E4M3FNUZ] = {"float8_e4m3fnuz", 1, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_FLOAT8_E5M2] = {"float8_e5m2", 1, DF_TENSOR_DTYPE_FLOAT},
    [DF_DTYPE_FLOAT8_E5M2FNUZ] = {"float8_e5m2fnuz", 1, DF_TENSOR_DTYPE_FLOAT},
};

static const struct {
  const char *alias;
  df_dtype type;
} aliases[] = {{"half", DF_DTYPE_FLOAT16},  {"fp16", DF_DTYPE_FLOAT16},
               {"bf16", DF_DTYPE_BFLOAT16}, {"float", DF_DTYPE_FLOAT32},
               {"double", DF_DTYPE_FLOAT64}};

const char *df_dtype_name(df_dtype t) {
  return (unsigned)t < DF_DTYPE_COUNT ? infos[t].name : "invalid";
}

uint32_t df_dtype_bytes(df_dtype t) {
  return (unsigned)t < DF_DTYPE_COUNT ? infos[t].bytes : 0;
}

uint32_t df_dtype_code(df_dtype t) {
  return (unsigned)t < DF_DTYPE_COUNT ? infos[t].code : DF_TENSOR_DTYPE_UNKNOWN;
}

uint32_t df_dtype_bits(df_dtype t) {
  return t == DF_DTYPE_BOOL ? 1 : 8 * df_dtype_bytes(t);
}

df_status df_dtype_parse(const char *name, df_dtype *out) {
  const char *dot = strrchr(name, '.');
  const char *base = dot ? dot + 1 : name;
  char lower[DF_NAME_MAX];
  size_t n = strlen(base);
  if (n >= sizeof lower)
    return df_status_errorf(DF_EINVAL, "unsupported dtype '%.40s...'", name);
  for (size_t i = 0; i <= n; i++)
    lower[i] = (char)tolower((unsigned char)base[i]);
  for (int t = 1; t < DF_DTYPE_COUNT; t++)
    if (strcmp(lower, infos[t].name) == 0) {
      *out = (df_dtype)t;
      return df_status_ok();
    }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(lower, aliases[i].alias) == 0) {
      *out = aliases[i].type;
      return df_status_ok();
    }
  return df_status_errorf(DF_EINVAL, "unsupported dtype '%s'", name);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint64_t elements64(const df_field *f) {
  uint64_t count = 1;
  for (uint32_t d = 0; d < f->rank; d++)
    count *= f->shape[d];
  return count;
}

/* Byte offset of field `n`: fields aligned to min(element bytes, 16). */
static uint64_t field_offset(const df_itype *t, uint32_t n, bool *ok) {
  uint64_t total = 0;
  *ok = true;
  for (uint32_t i = 0; i < t->field_count && i <= n; i++) {
    const df_field *f = &t->fields[i];
    uint64_t e = df_dtype_bytes(f->dtype);
    if (e == 0) {
      *ok = false;
      return 0;
    }
    total = align_up(total, e < 16 ? e : 16);
    if (i < n)
      total += e * elements64(f);
  }
  return total;
}

uint32_t df_field_elements(const df_field *f) {
  uint64_t count = elements64(f);
  return count > UINT32_MAX ? 0 : (uint32_t)count;
}

uint32_t df_itype_field_offset(const df_itype *t, uint32_t field) {
  bool ok;
  uint64_t off = field_offset(t, field, &ok);
  return ok && field < t->field_count && off <= UINT32_MAX ? (uint32_t)off : DF_SENTINEL;
}

uint32_t df_itype_slot_bytes(const df_itype *t) {
  bool ok;
  uint64_t total = 0;
  if (t->field_count) {
    const df_field *last = &t->fields[t->field_count - 1];
    total = field_offset(t, t->field_count - 1, &ok);
    if (!ok)
      return 0;
    total += (uint64_t)df_dtype_bytes(last->dtype) * elements64(last);
  }
  total = align_up(total, DF_SLOT_ALIGN);
  return total > UINT32_MAX ? 0 : (uint32_t)total;
}
