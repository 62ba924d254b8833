/* Implementations of an operator: architectures, the replacement spec
   syntax, region checks and text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/impl.h"

const char *df_arch_name(df_arch a) {
  switch (a) {
  case DF_ARCH_SM80: return "sm_80";
  case DF_ARCH_SM90: return "sm_90";
  case DF_ARCH_SM90A: return "sm_90a";
  default: return "any";
  }
}

df_status df_arch_parse(const char *text, df_arch *out) {
  const char *t = text ? text : "";
  if (strncmp(t, "sm_", 3) == 0)
    t += 3;
  if (strcmp(t, "80") == 0)
    *out = DF_ARCH_SM80;
  else if (strcmp(t, "90") == 0)
    *out = DF_ARCH_SM90;
  else if (strcmp(t, "90a") == 0)
    *out = DF_ARCH_SM90A;
  else
    return df_status_errorf(DF_EINVAL,
                            "unknown architecture '%s'; expected one of sm_80, sm_90, "
                            "sm_90a (or 80, 90, 90a)",
                            text ? text : "");
  return df_status_ok();
}

const char *df_impl_origin_name(df_impl_origin o) {
  switch (o) {
  case DF_IMPL_PROGRAM: return "program";
  case DF_IMPL_BUILTIN: return "built-in";
  case DF_IMPL_REPLACEMENT: return "replacement";
  }
  return "invalid";
}

df_status df_impl_check(const df_impl *im) {
  if (!im->name[0] || !im->op[0])
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s' must name its symbol and the operator it "
                            "implements",
                            im->name);
  if ((unsigned)im->iter > DF_IMPL_ITER_LENGTH)
    return df_status_errorf(DF_EINVAL, "implementation '%s' has an invalid iter region %d",
                            im->name, (int)im->iter);
  if (im->iter != DF_IMPL_ITER_ANY && im->iter_value == 0)
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s' of '%s': %s must be a positive integer",
                            im->name, im->op,
                            im->iter == DF_IMPL_ITER_TILES ? "tiles" : "length");
  if (im->has_arity && (unsigned)im->arity > DF_ARITY_GENERIC)
    return df_status_errorf(DF_EINVAL, "implementation '%s' has an invalid arity class %d",
                            im->name, (int)im->arity);
  if (im->general && (im->iter != DF_IMPL_ITER_ANY || im->has_arity))
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s' of '%s' is general but narrows the %s; a "
                            "general implementation serves every range and arity (drop "
                            "'general' to make it specialised)",
                            im->name, im->op, im->has_arity ? "arity" : "iter range");
  if ((unsigned)im->dtype >= DF_DTYPE_COUNT)
    return df_status_errorf(DF_EINVAL, "implementation '%s' has an invalid dtype %d", im->name,
                            (int)im->dtype);
  if (im->min_arch != DF_ARCH_ANY && im->min_arch != DF_ARCH_SM80 &&
      im->min_arch != DF_ARCH_SM90 && im->min_arch != DF_ARCH_SM90A)
    return df_status_errorf(DF_EINVAL, "implementation '%s' has an invalid architecture %d",
                            im->name, (int)im->min_arch);
  return df_status_ok();
}

int df_impl_region(const df_impl *im, char *buf, size_t cap) {
  size_t n = 0;
#define PUT(...)                                                                         \
  do {                                                                                   \
    int w_ = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s",           \
                      n ? "," : "");                                                     \
    n += (size_t)w_;                                                                     \
    w_ = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__);       \
    n += (size_t)w_;                                                                     \
  } while (0)
  if (cap)
    buf[0] = '\0';
  if (im->general)
    PUT("general");
  if (im->iter == DF_IMPL_ITER_TILES)
    PUT("tiles=%u", im->iter_value);
  else if (im->iter == DF_IMPL_ITER_LENGTH)
    PUT("length=%u", im->iter_value);
  if (im->has_arity)
    PUT("arity=%s", df_arity_class_name(im->arity));
  if (im->dtype != DF_DTYPE_INVALID)
    PUT("dtype=%s", df_dtype_name(im->dtype));
  if (im->min_arch != DF_ARCH_ANY)
    PUT("arch=%s", df_arch_name(im->min_arch));
  if (n == 0)
    PUT("any");
#undef PUT
  return (int)n;
}

static df_status parse_u32(const char *spec, const char *key, const char *v, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || errno || x == 0 || x > UINT32_MAX || *v == '-')
    return df_status_errorf(DF_EINVAL,
                            "replacement '%s': %s must be a positive integer, got '%s'", spec,
                            key, v);
  *out = (uint32_t)x;
  return df_status_ok();
}

/* One `key[=value]` of a replacement spec. */
static df_status parse_key(const char *spec, char *kv, df_impl *im) {
  char *eq = strchr(kv, '=');
  const char *v = eq ? eq + 1 : NULL;
  if (eq)
    *eq = '\0';
  if (strcmp(kv, "general") == 0) {
    if (v)
      return df_status_errorf(DF_EINVAL, "replacement '%s': 'general' takes no value", spec);
    im->general = true;
    return df_status_ok();
  }
  if (!v)
    return df_status_errorf(DF_EINVAL, "replacement '%s': '%s' needs a value (%s=...)", spec,
                            kv, kv);
  if (strcmp(kv, "tiles") == 0 || strcmp(kv, "length") == 0) {
    if (im->iter != DF_IMPL_ITER_ANY)
      return df_status_errorf(DF_EINVAL,
                              "replacement '%s': give one of tiles= and length=, once", spec);
    im->iter = kv[0] == 't' ? DF_IMPL_ITER_TILES : DF_IMPL_ITER_LENGTH;
    return parse_u32(spec, kv, v, &im->iter_value);
  }
  if (strcmp(kv, "arity") == 0) {
    for (int c = 0; c <= DF_ARITY_GENERIC; c++)
      if (strcmp(v, df_arity_class_name((df_arity_class)c)) == 0) {
        im->has_arity = true;
        im->arity = (df_arity_class)c;
        return df_status_ok();
      }
    return df_status_errorf(DF_EINVAL,
                            "replacement '%s': arity must be passthrough, binary or generic, "
                            "got '%s'",
                            spec, v);
  }
  if (strcmp(kv, "dtype") == 0) {
    df_status st = df_dtype_parse(v, &im->dtype);
    return df_failed(&st) ? df_status_wrap(st, spec) : st;
  }
  if (strcmp(kv, "arch") == 0) {
    df_status st = df_arch_parse(v, &im->min_arch);
    return df_failed(&st) ? df_status_wrap(st, spec) : st;
  }
  return df_status_errorf(DF_EINVAL,
                          "replacement '%s': unknown key '%s' (expected tiles, length, arity, "
                          "dtype, arch, general)",
                          spec, kv);
}

df_status df_impl_parse(const char *spec, df_impl *out) {
  memset(out, 0, sizeof *out);
  out->origin = DF_IMPL_REPLACEMENT;
  char buf[512];
  if (!spec || strlen(spec) >= sizeof buf)
    return df_status_errorf(DF_EINVAL, "replacement spec is missing or longer than %zu bytes",
                            sizeof buf - 1);
  memcpy(buf, spec, strlen(spec) + 1);
  char *colon = strchr(buf, ':');
  if (colon)
    *colon = '\0';
  char *eq = strchr(buf, '=');
  if (!eq || eq == buf || !eq[1])
    return df_status_errorf(DF_EINVAL,
                            "replacement '%s' must read OPERATOR=SYMBOL[:key=value,...]", spec);
  *eq = '\0';
  if (strlen(buf) >= DF_NAME_MAX || strlen(eq + 1) >= DF_NAME_MAX)
    return df_status_errorf(DF_EINVAL, "replacement '%s': names are at most %d bytes", spec,
                            DF_NAME_MAX - 1);
  memcpy(out->op, buf, strlen(buf) + 1);
  memcpy(out->name, eq + 1, strlen(eq + 1) + 1);
  for (char *kv = colon ? colon + 1 : NULL; kv && *kv;) {
    char *comma = strchr(kv, ',');
    if (comma)
      *comma = '\0';
    DF_TRY(parse_key(spec, kv, out));
    kv = comma ? comma + 1 : NULL;
  }
  df_status st = df_impl_check(out);
  return df_failed(&st) ? df_status_wrap(st, "replacement") : st;
}
