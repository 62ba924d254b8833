#include "df/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

df_status df_status_ok(void) {
  df_status s;
  s.code = DF_OK;
  s.message[0] = '\0';
  return s;
}

df_status df_status_errorf(df_code code, const char *fmt, ...) {
  df_status s;
  s.code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s.message, sizeof s.message, fmt, ap);
  va_end(ap);
  return s;
}

df_status df_status_wrap(df_status inner, const char *prefix) {
  if (inner.code == DF_OK)
    return inner;
  df_status s;
  s.code = inner.code;
  snprintf(s.message, sizeof s.message, "%s: %s", prefix, inner.message);
  return s;
}

const char *df_code_name(df_code code) {
  switch (code) {
  case DF_OK: return "ok";
  case DF_EINVAL: return "invalid";
  case DF_EUNSUPPORTED: return "unsupported";
  case DF_ENOMEM: return "out of memory";
  case DF_EIO: return "i/o";
  case DF_EFORMAT: return "format";
  case DF_EINTERNAL: return "internal";
  case DF_ETIMEOUT: return "timeout";
  }
  return "unknown";
}
