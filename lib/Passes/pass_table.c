/* The table of df passes that df-opt exposes as --<name>="options". */
#include "df/compiler.h"
#include "pass_util.h"

static df_status create_verify(const char *options, MlirPass *out) {
  if (options && *options)
    return df_status_errorf(DF_EINVAL, "df-verify takes no options, got '%s'", options);
  *out = df_create_verify_pass();
  return df_status_ok();
}

static const df_pass_info table[] = {
    {"df-verify", "check every rule of the df dialect and the program model (always run first)",
     "", create_verify},
    {NULL, NULL, NULL, NULL},
};

const df_pass_info *df_pass_table(void) { return table; }
