#include "host_tensor.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

/* ---- files ---------------------------------------------------------------- */

df_status read_whole_file(const char *path, uint8_t **bytes, size_t *len) {
  *bytes = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return df_status_errorf(DF_EIO, "cannot open '%s': %s", path, strerror(errno));
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0)
    n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return df_status_errorf(DF_EIO, "cannot size '%s'", path);
  }
  uint8_t *b = malloc((size_t)n + 1);
  if (!b) {
    fclose(f);
    return df_status_errorf(DF_ENOMEM, "out of memory reading '%s'", path);
  }
  size_t got = fread(b, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) {
    free(b);
    return df_status_errorf(DF_EIO, "short read of '%s'", path);
  }
  *bytes = b;
  *len = (size_t)n;
  return df_status_ok();
}

df_status write_whole_file(const char *path, const void *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return df_status_errorf(DF_EIO, "cannot create '%s': %s", path, strerror(errno));
  size_t put = len ? fwrite(bytes, 1, len, f) : 0;
  int closed = fclose(f);
  if (put != len || closed != 0)
    return df_status_errorf(DF_EIO, "cannot write '%s'", path);
  return df_status_ok();
}

/* ---- parsing -------------------------------------------------------------------- */

static df_status parse_shape(const char *text, host_tensor *t) {
  t->ndim = 0;
  if (strcmp(text, "scalar") == 0)
    return df_status_ok();
  const char *p = text;
  while (*p) {
    if (t->ndim == DF_RT_MAX_DIMS)
      return df_status_errorf(DF_EINVAL, "tensor '%s': shape '%s' has more than %u dimensions",
                              t->name, text, DF_RT_MAX_DIMS);
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || (*end && *end != 'x'))
      return df_status_errorf(DF_EINVAL,
                              "tensor '%s': shape '%s' is not non-negative integers joined by "
                              "'x' (e.g. 4x16)",
                              t->name, text);
    t->shape[t->ndim++] = v;
    p = *end ? end + 1 : end;
    if (*end == 'x' && !*p)
      return df_status_errorf(DF_EINVAL, "tensor '%s': shape '%s' ends with 'x'", t->name,
                              text);
  }
  if (t->ndim == 0)
    return df_status_errorf(DF_EINVAL, "tensor '%s': empty shape", t->name);
  return df_status_ok();
}

static df_status finish(host_tensor *t, const char *dtype, const char *shape) {
  df_status s = df_dtype_parse(dtype, &t->dtype);
  if (s.code != DF_OK)
    return df_status_wrap(s, "tensor dtype");
  DF_TRY(parse_shape(shape, t));
  double bytes = df_dtype_bytes(t->dtype);
  for (uint32_t i = 0; i < t->ndim; i++)
    bytes *= (double)t->shape[i];
  if (bytes > 64.0 * 1024 * 1024 * 1024)
    return df_status_errorf(DF_EINVAL, "tensor '%s': %.0f bytes is too large", t->name, bytes);
  t->bytes = (size_t)bytes;
  return df_status_ok();
}

/* Split `spec` at ':' into at most `max` fields (the first field of a file
   spec may not contain ':'; the path is everything up to the last two). */
static int split(char *spec, char **fields, int max) {
  int n = 0;
  fields[n++] = spec;
  for (char *p = spec; *p && n < max; p++)
    if (*p == ':') {
      *p = '\0';
      fields[n++] = p + 1;
    }
  return n;
}

df_status host_tensor_parse(const char *name, const char *spec, uint64_t default_seed,
                            host_tensor *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  char buf[1200];
  if (strlen(spec) >= sizeof buf)
    return df_status_errorf(DF_EINVAL, "tensor '%s': spec is too long", name);
  snprintf(buf, sizeof buf, "%s", spec);
  if (strncmp(buf, "file:", 5) == 0) {
    /* file:PATH:DTYPE:SHAPE: the last two fields are dtype and shape. */
    char *shape = strrchr(buf, ':');
    *shape++ = '\0';
    char *dtype = strrchr(buf, ':');
    if (!dtype || dtype < buf + 4)
      return df_status_errorf(DF_EINVAL, "tensor '%s': expected file:PATH:DTYPE:SHAPE, got '%s'",
                              name, spec);
    *dtype++ = '\0';
    if (!buf[5])
      return df_status_errorf(DF_EINVAL, "tensor '%s': empty file path", name);
    t->source = HT_FILE;
    snprintf(t->path, sizeof t->path, "%s", buf + 5);
    return finish(t, dtype, shape);
  }
  if (strncmp(buf, "npy:", 4) == 0 || npy_is_path(buf)) {
    const char *path = strncmp(buf, "npy:", 4) == 0 ? buf + 4 : buf;
    if (!path[0])
      return df_status_errorf(DF_EINVAL, "tensor '%s': empty .npy path", name);
    t->source = HT_NPY;
    snprintf(t->path, sizeof t->path, "%s", path);
    return df_status_ok(); /* dtype and shape come from the header */
  }
  char *f[5];
  int n = split(buf, f, 5);
  if (strcmp(f[0], "random") == 0 && (n == 3 || n == 4)) {
    t->source = HT_RANDOM;
    t->seed = default_seed;
    if (n == 4) {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(f[3], &end, 0);
      if (end == f[3] || *end || errno)
        return df_status_errorf(DF_EINVAL, "tensor '%s': seed '%s' is not an integer", name,
                                f[3]);
      t->seed = v;
    }
    return finish(t, f[1], f[2]);
  }
  if (strcmp(f[0], "zeros") == 0 && n == 3) {
    t->source = HT_ZEROS;
    return finish(t, f[1], f[2]);
  }
  return df_status_errorf(DF_EINVAL,
                          "tensor '%s': expected file:PATH:DTYPE:SHAPE, random:DTYPE:SHAPE[:SEED], "
                          "zeros:DTYPE:SHAPE or PATH.npy, got '%s'",
                          name, spec);
}

/* ---- conversions ------------------------------------------------------------------ */

static uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff)
    return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10)
      return (uint16_t)sign;
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
      h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
    h++; /* may carry into the exponent: still correct rounding */
  return (uint16_t)(sign | h);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400u));
      x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (man << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static bool is_float8(df_dtype t) {
  return t >= DF_DTYPE_FLOAT8_E4M3 && t <= DF_DTYPE_FLOAT8_E5M2FNUZ;
}

/* Element i as a double (not for float8). */
double host_value_load(df_dtype t, const uint8_t *p, size_t i) {
  switch (t) {
  case DF_DTYPE_BOOL: return p[i] != 0;
  case DF_DTYPE_INT8: return (int8_t)p[i];
  case DF_DTYPE_UINT8: return p[i];
  case DF_DTYPE_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
  case DF_DTYPE_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
  case DF_DTYPE_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
  case DF_DTYPE_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
  case DF_DTYPE_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
  case DF_DTYPE_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
  case DF_DTYPE_FLOAT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return half_to_float(v); }
  case DF_DTYPE_BFLOAT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_float(v); }
  case DF_DTYPE_FLOAT32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
  case DF_DTYPE_FLOAT64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
  default: return 0;
  }
}

/* Store a value as element i. */
void host_value_store(df_dtype t, uint8_t *p, size_t i, double v) {
  switch (t) {
  case DF_DTYPE_BOOL: p[i] = v != 0; break;
  case DF_DTYPE_INT8: p[i] = (uint8_t)(int8_t)v; break;
  case DF_DTYPE_UINT8: p[i] = (uint8_t)v; break;
  case DF_DTYPE_INT16: { int16_t x = (int16_t)v; memcpy(p + 2 * i, &x, 2); break; }
  case DF_DTYPE_UINT16: { uint16_t x = (uint16_t)v; memcpy(p + 2 * i, &x, 2); break; }
  case DF_DTYPE_INT32: { int32_t x = (int32_t)v; memcpy(p + 4 * i, &x, 4); break; }
  case DF_DTYPE_UINT32: { uint32_t x = (uint32_t)v; memcpy(p + 4 * i, &x, 4); break; }
  case DF_DTYPE_INT64: { int64_t x = (int64_t)v; memcpy(p + 8 * i, &x, 8); break; }
  case DF_DTYPE_UINT64: { uint64_t x = (uint64_t)v; memcpy(p + 8 * i, &x, 8); break; }
  case DF_DTYPE_FLOAT16: { uint16_t x = float_to_half((float)v); memcpy(p + 2 * i, &x, 2); break; }
  case DF_DTYPE_BFLOAT16: { uint16_t x = float_to_bf16((float)v); memcpy(p + 2 * i, &x, 2); break; }
  case DF_DTYPE_FLOAT32: { float x = (float)v; memcpy(p + 4 * i, &x, 4); break; }
  case DF_DTYPE_FLOAT64: memcpy(p + 8 * i, &v, 8); break;
  default: break;
  }
}

static df_status generate(host_tensor *t) {
  if (is_float8(t->dtype))
    return df_status_errorf(DF_EUNSUPPORTED,
                            "tensor '%s': random float8 values are not supported; use file:",
                            t->name);
  size_t n = t->bytes / df_dtype_bytes(t->dtype);
  host_random_fill(t->dtype, t->seed, 0, n, t->data, n >= (1u << 22) ? 16 : 1);
  return df_status_ok();
}

static df_status fill_npy(host_tensor *t) {
  npy_header h;
  df_status s = npy_read(t->path, &h, &t->data);
  if (s.code != DF_OK)
    return df_status_wrap(s, t->name);
  t->dtype = h.dtype;
  t->ndim = h.ndim;
  memcpy(t->shape, h.shape, sizeof t->shape);
  t->bytes = h.data_bytes;
  return df_status_ok();
}

df_status host_tensor_fill(host_tensor *t) {
  if (t->source == HT_NPY)
    return fill_npy(t);
  t->data = malloc(t->bytes ? t->bytes : 1);
  if (!t->data)
    return df_status_errorf(DF_ENOMEM, "tensor '%s': out of memory for %zu bytes", t->name,
                            t->bytes);
  memset(t->data, 0, t->bytes ? t->bytes : 1);
  if (t->source == HT_ZEROS)
    return df_status_ok();
  if (t->source == HT_RANDOM)
    return generate(t);
  uint8_t *bytes;
  size_t len;
  df_status s = read_whole_file(t->path, &bytes, &len);
  if (s.code != DF_OK)
    return df_status_wrap(s, t->name);
  if (len != t->bytes) {
    free(bytes);
    return df_status_errorf(DF_EINVAL, "tensor '%s': file '%s' has %zu bytes, %s %s needs %zu",
                            t->name, t->path, len, df_dtype_name(t->dtype), "shape", t->bytes);
  }
  memcpy(t->data, bytes, len);
  free(bytes);
  return df_status_ok();
}

void host_tensor_describe(const host_tensor *t, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "%s ", df_dtype_name(t->dtype));
  for (uint32_t i = 0; i < t->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? "x" : "",
                             (long long)t->shape[i]);
  if (t->ndim == 0 && used < cap)
    used += (size_t)snprintf(buf + used, cap - used, "scalar");
  if (used >= cap)
    return;
  if (t->source == HT_FILE || t->source == HT_NPY)
    snprintf(buf + used, cap - used, " from %s", t->path);
  else if (t->source == HT_RANDOM)
    snprintf(buf + used, cap - used, " random(seed %llu)", (unsigned long long)t->seed);
  else
    snprintf(buf + used, cap - used, " zeros");
}

void host_tensor_free(host_tensor *t) {
  free(t->data);
  t->data = NULL;
}

df_status host_tensor_compare(const host_tensor *t, const uint8_t *got, const uint8_t *ref,
                              df_dtype ref_dtype, double rtol, double atol,
                              compare_result *out) {
  memset(out, 0, sizeof *out);
  if ((is_float8(t->dtype) || is_float8(ref_dtype)) && ref_dtype != t->dtype)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "tensor '%s': a %s tensor compares only with a %s reference (got %s)",
                            t->name, df_dtype_name(t->dtype), df_dtype_name(t->dtype),
                            df_dtype_name(ref_dtype));
  double err2 = 0, ref2 = 0;
  size_t eb = df_dtype_bytes(t->dtype);
  size_t n = eb ? t->bytes / eb : 0;
  out->elements = n;
  for (size_t i = 0; i < n; i++) {
    bool ok;
    if (is_float8(t->dtype)) {
      ok = got[i] == ref[i];
      if (!ok) {
        out->max_abs = INFINITY;
      }
    } else {
      double a = host_value_load(t->dtype, got, i), b = host_value_load(ref_dtype, ref, i);
      double diff = fabs(a - b);
      ok = !isnan(a) && !isnan(b) && diff <= atol + rtol * fabs(b);
      if (isnan(a) || isnan(b))
        diff = INFINITY;
      if (diff > out->max_abs)
        out->max_abs = diff;
      double rel = isinf(diff) ? INFINITY : b != 0 ? diff / fabs(b) : (diff != 0 ? INFINITY : 0);
      if (rel > out->max_rel)
        out->max_rel = rel;
      err2 += isinf(diff) ? INFINITY : diff * diff;
      ref2 += b * b;
    }
    if (!ok) {
      if (out->mismatches == 0)
        out->first_mismatch = i;
      out->mismatches++;
    }
  }
  out->rel_l2 = ref2 > 0 ? sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0);
  return df_status_ok();
}
