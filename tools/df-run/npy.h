/* NumPy .npy files (format versions 1.0, 2.0 and 3.0): header parsing
   and writing for the dtypes df-run handles, little-endian, C order.
   Supported descrs: <f2 <f4 <f8, |i1 <i2 <i4 <i8, |u1 <u2 <u4 <u8, |b1
   ('=' is read as '<'). Big-endian data, Fortran order, structured and
   void dtypes (bfloat16 as '<V2' from ml_dtypes is one) are refused with
   a message saying why. */
#ifndef DF_RUN_NPY_H
#define DF_RUN_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "df/program.h"
#include "df/runtime.h"
#include "df/status.h"

typedef struct npy_header {
  df_dtype dtype;
  uint32_t ndim;
  int64_t shape[DF_RT_MAX_DIMS];
  size_t data_offset; /* bytes before the data */
  size_t data_bytes;  /* element bytes x elements */
  uint8_t major, minor;
} npy_header;

/* Whether `path` names a .npy file (by its suffix). */
int npy_is_path(const char *path);
/* Parse the header of the file bytes `bytes` (len bytes; the data must
   follow and have exactly the size the header says). `what` names the
   file in messages. */
df_status npy_parse(const uint8_t *bytes, size_t len, const char *what, npy_header *out);
/* Read a whole .npy file: header and a malloc'ed copy of the data. */
df_status npy_read(const char *path, npy_header *h, uint8_t **data);
/* Write data of `dtype` and `shape` as a version 1.0 (2.0 when the header
   needs it) .npy file, C order. */
df_status npy_write(const char *path, df_dtype dtype, uint32_t ndim, const int64_t *shape,
                    const void *data, size_t bytes);
/* The numpy descr of a dtype ("<f4"), NULL when .npy cannot hold it. */
const char *npy_descr(df_dtype dtype);

#endif
