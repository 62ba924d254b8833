/* df status values: every fallible df function returns one. */
#ifndef DF_STATUS_H
#define DF_STATUS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error classes; the message says what exactly went wrong. */
typedef enum df_code {
  DF_OK = 0,
  DF_EINVAL = 1,      /* the input breaks a rule of the model or ABI */
  DF_EUNSUPPORTED = 2,/* valid in principle, not supported by df */
  DF_ENOMEM = 3,      /* the allocator returned NULL */
  DF_EIO = 4,         /* a file could not be read or written */
  DF_EFORMAT = 5,     /* bytes that are not a well-formed df artefact */
  DF_EINTERNAL = 6,   /* an invariant of df itself failed */
  DF_ETIMEOUT = 7,    /* a wait ran past its deadline (libdfrt's watchdog) */
} df_code;

enum { DF_STATUS_MESSAGE_MAX = 512 };

/* A status: code DF_OK and an empty message on success. */
typedef struct df_status {
  df_code code;
  char message[DF_STATUS_MESSAGE_MAX];
} df_status;

/* The success value. */
df_status df_status_ok(void);

/* A failure with a printf-formatted message (truncated to fit). */
df_status df_status_errorf(df_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A copy of `inner` whose message is prefixed with `prefix: `. */
df_status df_status_wrap(df_status inner, const char *prefix);

/* The name of an error class ("invalid", "unsupported", ...). */
const char *df_code_name(df_code code);

static inline bool df_failed(const df_status *s) { return s->code != DF_OK; }

/* Return from the current function when `expr` yields a failure. */
#define DF_TRY(expr)                                                           \
  do {                                                                         \
    df_status df_try_status_ = (expr);                                         \
    if (df_try_status_.code != DF_OK)                                          \
      return df_try_status_;                                                   \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
