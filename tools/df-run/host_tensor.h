/* df-run's host tensors: dtype and shape from the command line, contents
   from a raw file, zeros or a seeded random generator, and comparison
   against a reference with tolerances. */
#ifndef DF_RUN_HOST_TENSOR_H
#define DF_RUN_HOST_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "df/program.h"
#include "df/runtime.h"
#include "df/status.h"

typedef enum ht_source { HT_FILE = 0, HT_RANDOM = 1, HT_ZEROS = 2 } ht_source;

typedef struct host_tensor {
  char name[DF_NAME_MAX];
  ht_source source;
  char path[1024]; /* HT_FILE */
  uint64_t seed;   /* HT_RANDOM */
  df_dtype dtype;
  uint32_t ndim;
  int64_t shape[DF_RT_MAX_DIMS];
  size_t bytes;
  uint8_t *data; /* malloc'ed, `bytes` long */
} host_tensor;

/* Parse "file:PATH:DTYPE:SHAPE", "random:DTYPE:SHAPE[:SEED]" or
   "zeros:DTYPE:SHAPE" (SHAPE = dims joined by 'x', e.g. 4x16; "scalar" for
   rank 0). default_seed applies to random tensors without a seed. */
df_status host_tensor_parse(const char *name, const char *spec, uint64_t default_seed,
                            host_tensor *out);
/* Fill data: read the file (its size must match), generate or zero. */
df_status host_tensor_fill(host_tensor *t);
/* One-line description ("float16 4x16 random(seed 1)"). */
void host_tensor_describe(const host_tensor *t, char *buf, size_t cap);
void host_tensor_free(host_tensor *t);

typedef struct compare_result {
  size_t elements, mismatches, first_mismatch;
  double max_abs, max_rel;
} compare_result;

/* Compare `got` with the reference bytes `ref` (same dtype and size):
   |got - ref| <= atol + rtol * |ref|, NaN never passes; float8 dtypes
   compare bytes exactly. */
df_status host_tensor_compare(const host_tensor *t, const uint8_t *got, const uint8_t *ref,
                              double rtol, double atol, compare_result *out);

/* Read a whole file into malloc'ed memory. */
df_status read_whole_file(const char *path, uint8_t **bytes, size_t *len);
df_status write_whole_file(const char *path, const void *bytes, size_t len);

#endif
