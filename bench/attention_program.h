/* The decode attention program of the benchmarks, built through the
   program API: partial(split_kv) -> reduce(combine) -> finalize, with
   AttnInter {lse: f32; o: f32[128]}. Exits on failure. */
#ifndef DF_BENCH_ATTENTION_PROGRAM_H
#define DF_BENCH_ATTENTION_PROGRAM_H

#include <stdbool.h>

#include "df/program.h"

/* What varies between the benches' attention programs. */
typedef struct bench_attention_shape {
  const char *outer_axis; /* the first task axis ("batch", "seq") */
  df_dtype o_dtype;       /* AttnInter.o's element type */
  bool tensors;           /* split_kv(seq, K) and finalize(inter, O), else
                             split_kv() and finalize(inter): no tensors */
} bench_attention_shape;

df_program *bench_attention_program_of(const bench_attention_shape *shape);

/* Axes (batch, head), o: f32[128], with tensors. */
df_program *bench_attention_program(void);

#endif
