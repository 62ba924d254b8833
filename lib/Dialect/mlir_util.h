/* Small helpers over the MLIR C API for lib/Dialect and lib/Passes. */
#ifndef DF_MLIR_UTIL_H
#define DF_MLIR_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/status.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"

/* True when the operation's name equals `name`. */
bool df_op_is(MlirOperation op, const char *name);
/* Copy a string ref into a fixed buffer; false when it does not fit. */
bool df_strref_copy(MlirStringRef s, char *dst, size_t cap);
bool df_strref_eq(MlirStringRef s, const char *text);
/* Print a type / attribute into a buffer (truncated to fit). */
void df_type_to_string(MlirType t, char *buf, size_t cap);
void df_attr_to_string(MlirAttribute a, char *buf, size_t cap);
/* Named attribute of an operation; null attribute if absent. */
MlirAttribute df_op_attr(MlirOperation op, const char *name);

/* Emit an error diagnostic at `loc` and return the same message as a
   status (code DF_EINVAL). */
df_status df_emit(MlirLocation loc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The intermediate name of `!df.inter<"X">` (kind 'i') or `!df.list<"X">`
   (kind 'l'); `!df.tensor` is kind 't'. Returns false for other types. */
bool df_type_classify(MlirType t, char *kind, char *name, size_t cap);

/* Optional attribute readers: absent -> default/ok; wrong kind -> error
   at op naming the attribute. */
df_status df_attr_string(MlirOperation op, const char *attr, bool required,
                         char *dst, size_t cap, bool *present);
df_status df_attr_symbol(MlirOperation op, const char *attr, char *dst,
                         size_t cap);
/* Array of strings: writes up to max entries of cap bytes each. */
df_status df_attr_string_array(MlirOperation op, const char *attr,
                               uint32_t max, char (*dst)[64], uint32_t *count,
                               bool *present);
df_status df_attr_int(MlirOperation op, const char *attr, int64_t *out,
                      bool *present);

#endif
