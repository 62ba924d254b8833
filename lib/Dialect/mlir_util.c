#include "mlir_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mlir-c/Diagnostics.h"

bool df_strref_eq(MlirStringRef s, const char *text) {
  size_t n = strlen(text);
  return s.length == n && memcmp(s.data, text, n) == 0;
}

bool df_op_is(MlirOperation op, const char *name) {
  return df_strref_eq(mlirIdentifierStr(mlirOperationGetName(op)), name);
}

bool df_strref_copy(MlirStringRef s, char *dst, size_t cap) {
  if (s.length >= cap)
    return false;
  memcpy(dst, s.data, s.length);
  dst[s.length] = '\0';
  return true;
}

typedef struct print_buf {
  char *buf;
  size_t cap, len;
} print_buf;

static void print_cb(MlirStringRef s, void *user) {
  print_buf *b = user;
  for (size_t i = 0; i < s.length && b->len + 1 < b->cap; i++)
    b->buf[b->len++] = s.data[i];
  b->buf[b->len] = '\0';
}

void df_type_to_string(MlirType t, char *buf, size_t cap) {
  print_buf b = {buf, cap, 0};
  buf[0] = '\0';
  mlirTypePrint(t, print_cb, &b);
}

void df_attr_to_string(MlirAttribute a, char *buf, size_t cap) {
  print_buf b = {buf, cap, 0};
  buf[0] = '\0';
  mlirAttributePrint(a, print_cb, &b);
}

MlirAttribute df_op_attr(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(name));
}

df_status df_emit(MlirLocation loc, const char *fmt, ...) {
  df_status s;
  s.code = DF_EINVAL;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s.message, sizeof s.message, fmt, ap);
  va_end(ap);
  mlirEmitError(loc, s.message);
  return s;
}

bool df_type_classify(MlirType t, char *kind, char *name, size_t cap) {
  char text[256];
  df_type_to_string(t, text, sizeof text);
  if (strcmp(text, "!df.tensor") == 0) {
    *kind = 't';
    if (cap)
      name[0] = '\0';
    return true;
  }
  const char *rest;
  if (strncmp(text, "!df.inter<\"", 11) == 0) {
    *kind = 'i';
    rest = text + 11;
  } else if (strncmp(text, "!df.list<\"", 10) == 0) {
    *kind = 'l';
    rest = text + 10;
  } else {
    return false;
  }
  const char *end = strstr(rest, "\">");
  if (!end || end[2] != '\0' || (size_t)(end - rest) >= cap || memchr(rest, '\\', end - rest))
    return false;
  memcpy(name, rest, end - rest);
  name[end - rest] = '\0';
  return true;
}

df_status df_attr_string(MlirOperation op, const char *attr, bool required, char *dst,
                         size_t cap, bool *present) {
  MlirAttribute a = df_op_attr(op, attr);
  if (present)
    *present = !mlirAttributeIsNull(a);
  if (mlirAttributeIsNull(a)) {
    if (required)
      return df_emit(mlirOperationGetLocation(op), "'%s' requires a string attribute '%s'",
                     mlirIdentifierStr(mlirOperationGetName(op)).data, attr);
    return df_status_ok();
  }
  if (!mlirAttributeIsAString(a))
    return df_emit(mlirOperationGetLocation(op), "attribute '%s' must be a string", attr);
  if (!df_strref_copy(mlirStringAttrGetValue(a), dst, cap))
    return df_emit(mlirOperationGetLocation(op), "attribute '%s' is longer than %zu bytes",
                   attr, cap - 1);
  return df_status_ok();
}

df_status df_attr_symbol(MlirOperation op, const char *attr, char *dst, size_t cap) {
  MlirAttribute a = df_op_attr(op, attr);
  if (mlirAttributeIsNull(a) || !mlirAttributeIsAFlatSymbolRef(a))
    return df_emit(mlirOperationGetLocation(op), "attribute '%s' must be a symbol reference",
                   attr);
  if (!df_strref_copy(mlirFlatSymbolRefAttrGetValue(a), dst, cap))
    return df_emit(mlirOperationGetLocation(op), "symbol in '%s' is longer than %zu bytes",
                   attr, cap - 1);
  return df_status_ok();
}

df_status df_attr_string_array(MlirOperation op, const char *attr, uint32_t max,
                               char (*dst)[64], uint32_t *count, bool *present) {
  MlirAttribute a = df_op_attr(op, attr);
  *count = 0;
  if (present)
    *present = !mlirAttributeIsNull(a);
  if (mlirAttributeIsNull(a))
    return df_status_ok();
  MlirLocation loc = mlirOperationGetLocation(op);
  if (!mlirAttributeIsAArray(a))
    return df_emit(loc, "attribute '%s' must be an array of strings", attr);
  intptr_t n = mlirArrayAttrGetNumElements(a);
  if (n > (intptr_t)max)
    return df_emit(loc, "attribute '%s' has %ld entries, at most %u are supported", attr,
                   (long)n, max);
  for (intptr_t i = 0; i < n; i++) {
    MlirAttribute e = mlirArrayAttrGetElement(a, i);
    if (!mlirAttributeIsAString(e))
      return df_emit(loc, "attribute '%s' entry %ld must be a string", attr, (long)i);
    if (!df_strref_copy(mlirStringAttrGetValue(e), dst[i], 64))
      return df_emit(loc, "attribute '%s' entry %ld is longer than 63 bytes", attr, (long)i);
  }
  *count = (uint32_t)n;
  return df_status_ok();
}

df_status df_attr_int(MlirOperation op, const char *attr, int64_t *out, bool *present) {
  MlirAttribute a = df_op_attr(op, attr);
  if (present)
    *present = !mlirAttributeIsNull(a);
  if (mlirAttributeIsNull(a))
    return df_status_ok();
  if (!mlirAttributeIsAInteger(a))
    return df_emit(mlirOperationGetLocation(op), "attribute '%s' must be an integer", attr);
  *out = mlirIntegerAttrGetValueInt(a);
  return df_status_ok();
}
