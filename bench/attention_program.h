/* The decode attention program of the benchmarks, built through the
   program API: partial(split_kv) -> reduce(combine) -> finalize, with
   AttnInter {lse: f32; o: f32[128]}. Exits on failure. */
#ifndef DF_BENCH_ATTENTION_PROGRAM_H
#define DF_BENCH_ATTENTION_PROGRAM_H

#include "df/program.h"

df_program *bench_attention_program(void);

#endif
