/* A deep copy of a program for a run-time plan (df_program_clone). */
#include "internal.h"

df_status dfrt_program_clone(const df_program *p, const df_allocator *a, df_program **out) {
  df_status s = df_program_clone(p, a, out);
  return s.code == DF_OK ? s : df_status_wrap(s, "plan: copying the program");
}
