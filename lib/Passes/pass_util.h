/* Building df's external passes over the MLIR C API (internal). */
#ifndef DF_PASS_UTIL_H
#define DF_PASS_UTIL_H

#include <stddef.h>

#include "df/compiler.h"

/* Runs a pass on the module; a failure must already have been emitted as
   a located diagnostic. `options` is the pass's parsed option block. */
typedef df_status (*df_pass_run_fn)(MlirOperation module, const void *options);

/* Wrap `run` as an external module pass; the options block (`size`
   bytes) is copied into the pass and into every clone. */
MlirPass df_make_pass(const void *type_id_anchor, const char *name,
                      const char *description, df_pass_run_fn run,
                      const void *options, size_t size);

/* Split "key=value key2=value2" and call `set` per pair; errors name the
   pass and the key. */
typedef df_status (*df_option_setter)(void *options, const char *key,
                                      const char *value);
df_status df_parse_pass_options(const char *pass, const char *text,
                                void *options, df_option_setter set);

/* Option value parsers with messages naming the pass option. */
df_status df_option_u32(const char *key, const char *value, uint32_t *out);
df_status df_option_bool(const char *key, const char *value, bool *out);
/* Comma-separated u32 list into a caller array of `cap` entries. */
df_status df_option_u32_list(const char *key, const char *value, uint32_t *out,
                             uint32_t cap, uint32_t *count);

#endif
