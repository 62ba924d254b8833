#include "pass_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir_util.h"

typedef struct pass_state {
  df_pass_run_fn run;
  size_t size;
  char name[64];
  _Alignas(16) unsigned char options[];
} pass_state;

static void construct(void *user) { (void)user; }
static void destruct(void *user) { free(user); }

static void *clone_state(void *user) {
  pass_state *s = user;
  pass_state *c = malloc(sizeof *s + s->size);
  if (c)
    memcpy(c, s, sizeof *s + s->size);
  return c;
}

static void run(MlirOperation op, MlirExternalPass pass, void *user) {
  pass_state *s = user;
  df_status st = s->run(op, s->options);
  if (df_failed(&st))
    mlirExternalPassSignalFailure(pass);
}

MlirPass df_make_pass(const void *type_id_anchor, const char *name, const char *description,
                      df_pass_run_fn fn, const void *options, size_t size) {
  pass_state *s = malloc(sizeof *s + size);
  if (!s)
    return (MlirPass){NULL};
  s->run = fn;
  s->size = size;
  snprintf(s->name, sizeof s->name, "%s", name);
  if (size)
    memcpy(s->options, options, size);
  MlirExternalPassCallbacks cb = {construct, destruct, NULL, clone_state, run};
  return mlirCreateExternalPass(mlirTypeIDCreate(type_id_anchor),
                                mlirStringRefCreateFromCString(name),
                                mlirStringRefCreateFromCString(name),
                                mlirStringRefCreateFromCString(description),
                                mlirStringRefCreateFromCString("builtin.module"), 0, NULL, cb, s);
}

df_status df_parse_pass_options(const char *pass, const char *text, void *options,
                                df_option_setter set) {
  const char *p = text ? text : "";
  while (*p) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (!*p)
      break;
    const char *end = p;
    while (*end && *end != ' ' && *end != '\t')
      end++;
    /* Tokens can be long (range-lengths of a decode step: thousands of
       lengths), so each one gets a buffer of its own size. */
    size_t n = (size_t)(end - p);
    char *tok = malloc(n + 1);
    if (!tok)
      return df_status_errorf(DF_ENOMEM, "%s: out of memory for option '%.32s...'", pass, p);
    memcpy(tok, p, n);
    tok[n] = '\0';
    char *eq = strchr(tok, '=');
    df_status s;
    if (!eq) {
      s = df_status_errorf(DF_EINVAL, "%s: option '%.200s' must be written key=value", pass, tok);
    } else {
      *eq = '\0';
      s = set(options, tok, eq + 1);
      if (df_failed(&s))
        s = df_status_wrap(s, pass);
    }
    free(tok);
    if (df_failed(&s))
      return s;
    p = end;
  }
  return df_status_ok();
}

df_status df_option_u32(const char *key, const char *value, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(value, &end, 10);
  if (!*value || *end || errno || v > UINT32_MAX || value[0] == '-')
    return df_status_errorf(DF_EINVAL, "option '%s' expects an unsigned integer, got '%s'", key,
                            value);
  *out = (uint32_t)v;
  return df_status_ok();
}

df_status df_option_bool(const char *key, const char *value, bool *out) {
  if (!strcmp(value, "true") || !strcmp(value, "1"))
    *out = true;
  else if (!strcmp(value, "false") || !strcmp(value, "0"))
    *out = false;
  else
    return df_status_errorf(DF_EINVAL, "option '%s' expects true or false, got '%s'", key,
                            value);
  return df_status_ok();
}

df_status df_option_u32_list(const char *key, const char *value, uint32_t *out, uint32_t cap,
                             uint32_t *count) {
  /* Parsed in place (no fixed-size copy: a list may be thousands long). */
  *count = 0;
  for (const char *t = value; *t;) {
    const char *end = strchr(t, ',');
    size_t n = end ? (size_t)(end - t) : strlen(t);
    if (n) {
      char num[32];
      if (n >= sizeof num)
        return df_status_errorf(DF_EINVAL, "option '%s' expects unsigned integers, got '%.32s...'",
                                key, t);
      memcpy(num, t, n);
      num[n] = '\0';
      if (*count == cap)
        return df_status_errorf(DF_EINVAL, "option '%s' has more than %u values", key, cap);
      DF_TRY(df_option_u32(key, num, &out[(*count)++]));
    }
    t += n + (end ? 1 : 0);
  }
  if (*count == 0)
    return df_status_errorf(DF_EINVAL, "option '%s' needs at least one value", key);
  return df_status_ok();
}
