/* df-run's host tensors: dtype and shape from the command line, contents
   from a raw file, zeros or a seeded random generator, and comparison
   against a reference with tolerances. */
#ifndef DF_RUN_HOST_TENSOR_H
#define DF_RUN_HOST_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/program.h"
#include "df/runtime.h"
#include "df/status.h"

typedef enum ht_source { HT_FILE = 0, HT_RANDOM = 1, HT_ZEROS = 2, HT_NPY = 3 } ht_source;

typedef struct host_tensor {
  char name[DF_NAME_MAX];
  ht_source source;
  char path[1024]; /* HT_FILE, HT_NPY */
  uint64_t seed;   /* HT_RANDOM */
  df_dtype dtype;
  uint32_t ndim;
  int64_t shape[DF_RT_MAX_DIMS];
  size_t bytes;
  uint8_t *data; /* malloc'ed, `bytes` long */
} host_tensor;

/* Parse "file:PATH:DTYPE:SHAPE", "random:DTYPE:SHAPE[:SEED]",
   "zeros:DTYPE:SHAPE" (SHAPE = dims joined by 'x', e.g. 4x16; "scalar" for
   rank 0) or a .npy file ("PATH.npy" or "npy:PATH": dtype and shape from
   its header, read by host_tensor_fill). default_seed applies to random
   tensors without a seed. */
df_status host_tensor_parse(const char *name, const char *spec, uint64_t default_seed,
                            host_tensor *out);
/* Fill data: read the file (its size must match), generate or zero. */
/* Random tensors: element i is a function of (seed, i) alone (splitmix64
   of seed + (i+1) * golden ratio; floats uniform in [-1, 1) rounded to the
   dtype, signed ints in [-8, 8), unsigned in [0, 16), bools 0/1), so any
   part can be generated on its own and large tensors in parallel. */
df_status host_tensor_fill(host_tensor *t);
/* One-line description ("float16 4x16 random(seed 1)"). */
void host_tensor_describe(const host_tensor *t, char *buf, size_t cap);
void host_tensor_free(host_tensor *t);

typedef struct compare_result {
  size_t elements, mismatches, first_mismatch;
  double max_abs, max_rel;
  double rel_l2; /* ||got - ref|| / ||ref|| */
} compare_result;

/* Compare `got` with the reference `ref` of dtype ref_dtype (the same
   element count; a different dtype is compared as values, e.g. a float64
   reference for a float32 output): |got - ref| <= atol + rtol * |ref|, NaN
   never passes; float8 dtypes compare bytes exactly (same dtype only). */
df_status host_tensor_compare(const host_tensor *t, const uint8_t *got, const uint8_t *ref,
                              df_dtype ref_dtype, double rtol, double atol,
                              compare_result *out);

/* Element i of a dtype's buffer as a double, and the reverse (rounded to
   nearest even for the 16-bit floats). Not for float8. */
double host_value_load(df_dtype t, const uint8_t *p, size_t i);
void host_value_store(df_dtype t, uint8_t *p, size_t i, double v);
/* Elements [first, first + count) of the random tensor (dtype, seed) into
   out[0 .. count). threads > 1 splits the work. */
void host_random_fill(df_dtype dtype, uint64_t seed, size_t first, size_t count, uint8_t *out,
                      uint32_t threads);

/* Read a whole file into malloc'ed memory. */
df_status read_whole_file(const char *path, uint8_t **bytes, size_t *len);
df_status write_whole_file(const char *path, const void *bytes, size_t len);

#endif
