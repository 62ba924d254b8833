#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_tensor.h"

static const uint8_t MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct descr_map {
  const char *descr; /* without the byte-order character */
  df_dtype dtype;
} descr_map;

static const descr_map DESCRS[] = {
    {"f2", DF_DTYPE_FLOAT16}, {"f4", DF_DTYPE_FLOAT32}, {"f8", DF_DTYPE_FLOAT64},
    {"i1", DF_DTYPE_INT8},    {"i2", DF_DTYPE_INT16},   {"i4", DF_DTYPE_INT32},
    {"i8", DF_DTYPE_INT64},   {"u1", DF_DTYPE_UINT8},   {"u2", DF_DTYPE_UINT16},
    {"u4", DF_DTYPE_UINT32},  {"u8", DF_DTYPE_UINT64},  {"b1", DF_DTYPE_BOOL},
};

const char *npy_descr(df_dtype dtype) {
  static const char *const names[] = {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4",
                                      "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"};
  for (size_t i = 0; i < sizeof DESCRS / sizeof DESCRS[0]; i++)
    if (DESCRS[i].dtype == dtype)
      return names[i];
  return NULL;
}

int npy_is_path(const char *path) {
  size_t n = strlen(path);
  return n > 4 && strcmp(path + n - 4, ".npy") == 0;
}

/* ---- header dictionary ------------------------------------------------------ */

typedef struct cursor {
  const char *p, *end;
  const char *what;
} cursor;

static void skip_space(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static df_status expect(cursor *c, char ch) {
  skip_space(c);
  if (c->p >= c->end || *c->p != ch)
    return df_status_errorf(DF_EFORMAT, "%s: .npy header: expected '%c'", c->what, ch);
  c->p++;
  return df_status_ok();
}

/* A quoted Python string into buf. */
static df_status string(cursor *c, char *buf, size_t cap) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
    return df_status_errorf(DF_EFORMAT, "%s: .npy header: expected a quoted string", c->what);
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 < cap)
      buf[n++] = *c->p;
    c->p++;
  }
  if (c->p >= c->end)
    return df_status_errorf(DF_EFORMAT, "%s: .npy header: unterminated string", c->what);
  c->p++;
  buf[n] = '\0';
  return df_status_ok();
}

static df_status shape_tuple(cursor *c, npy_header *h) {
  DF_TRY(expect(c, '('));
  h->ndim = 0;
  for (;;) {
    skip_space(c);
    if (c->p < c->end && *c->p == ')') {
      c->p++;
      return df_status_ok();
    }
    if (h->ndim == DF_RT_MAX_DIMS)
      return df_status_errorf(DF_EUNSUPPORTED, "%s: .npy shape has more than %u dimensions",
                              c->what, DF_RT_MAX_DIMS);
    char *e;
    errno = 0;
    long long v = strtoll(c->p, &e, 10);
    if (e == c->p || errno || v < 0 || e > c->end)
      return df_status_errorf(DF_EFORMAT, "%s: .npy header: shape must be non-negative "
                                          "integers",
                              c->what);
    /* numpy 1.x may write 3L on Python 2; accept the suffix */
    c->p = e;
    if (c->p < c->end && *c->p == 'L')
      c->p++;
    h->shape[h->ndim++] = v;
    skip_space(c);
    if (c->p < c->end && *c->p == ',')
      c->p++;
    else if (c->p < c->end && *c->p != ')')
      return df_status_errorf(DF_EFORMAT, "%s: .npy header: malformed shape tuple", c->what);
  }
}

static df_status descr_dtype(const char *what, const char *d, df_dtype *out) {
  char order = d[0];
  if (order == '>' && strcmp(d + 1, "i1") && strcmp(d + 1, "u1") && strcmp(d + 1, "b1"))
    return df_status_errorf(DF_EUNSUPPORTED,
                            "%s: .npy dtype '%s' is big-endian; df-run reads little-endian "
                            "data (save it with arr.astype(arr.dtype.newbyteorder('<')))",
                            what, d);
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return df_status_errorf(DF_EUNSUPPORTED,
                            "%s: .npy dtype '%s' is not a plain numeric dtype (structured "
                            "dtypes are not supported)",
                            what, d);
  for (size_t i = 0; i < sizeof DESCRS / sizeof DESCRS[0]; i++)
    if (strcmp(d + 1, DESCRS[i].descr) == 0) {
      *out = DESCRS[i].dtype;
      return df_status_ok();
    }
  if (d[1] == 'V')
    return df_status_errorf(DF_EUNSUPPORTED,
                            "%s: .npy dtype '%s' is a raw void type (bfloat16 and float8 from "
                            "ml_dtypes are saved so); df-run reads float16/32/64, ints and "
                            "bool: convert, or pass raw bytes with file:PATH:DTYPE:SHAPE",
                            what, d);
  return df_status_errorf(DF_EUNSUPPORTED,
                          "%s: .npy dtype '%s' is not supported (float16/32/64, int8-64, "
                          "uint8-64, bool)",
                          what, d);
}

static df_status parse_dict(cursor *c, npy_header *h) {
  bool have_descr = false, have_order = false, have_shape = false;
  char descr[32] = "";
  DF_TRY(expect(c, '{'));
  for (;;) {
    skip_space(c);
    if (c->p < c->end && *c->p == '}') {
      c->p++;
      break;
    }
    char key[32];
    DF_TRY(string(c, key, sizeof key));
    DF_TRY(expect(c, ':'));
    if (strcmp(key, "descr") == 0) {
      skip_space(c);
      if (c->p < c->end && *c->p == '[')
        return df_status_errorf(DF_EUNSUPPORTED, "%s: .npy dtype is structured (a list of "
                                                 "fields); df-run reads plain arrays",
                                c->what);
      DF_TRY(string(c, descr, sizeof descr));
      have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      skip_space(c);
      if (c->end - c->p >= 4 && strncmp(c->p, "True", 4) == 0)
        return df_status_errorf(DF_EUNSUPPORTED,
                                "%s: .npy array is in Fortran order (fortran_order True); "
                                "df-run needs C order (save np.ascontiguousarray(a))",
                                c->what);
      if (c->end - c->p < 5 || strncmp(c->p, "False", 5) != 0)
        return df_status_errorf(DF_EFORMAT, "%s: .npy header: fortran_order must be True or "
                                            "False",
                                c->what);
      c->p += 5;
      have_order = true;
    } else if (strcmp(key, "shape") == 0) {
      DF_TRY(shape_tuple(c, h));
      have_shape = true;
    } else {
      return df_status_errorf(DF_EFORMAT, "%s: .npy header: unexpected key '%s'", c->what, key);
    }
    skip_space(c);
    if (c->p < c->end && *c->p == ',')
      c->p++;
  }
  if (!have_descr || !have_order || !have_shape)
    return df_status_errorf(DF_EFORMAT, "%s: .npy header lacks '%s'", c->what,
                            !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
  return descr_dtype(c->what, descr, &h->dtype);
}

df_status npy_parse(const uint8_t *b, size_t len, const char *what, npy_header *h) {
  memset(h, 0, sizeof *h);
  if (len < 10 || memcmp(b, MAGIC, sizeof MAGIC) != 0)
    return df_status_errorf(DF_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", what);
  h->major = b[6];
  h->minor = b[7];
  size_t hlen, start;
  if (h->major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    start = 10;
  } else if (h->major == 2 || h->major == 3) {
    if (len < 12)
      return df_status_errorf(DF_EFORMAT, "%s: truncated .npy header", what);
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    start = 12;
  } else {
    return df_status_errorf(DF_EUNSUPPORTED, "%s: .npy format version %u.%u is not supported "
                                             "(1.0, 2.0, 3.0)",
                            what, h->major, h->minor);
  }
  if (hlen > len - start)
    return df_status_errorf(DF_EFORMAT, "%s: .npy header of %zu bytes runs past the file (%zu "
                                        "bytes)",
                            what, hlen, len);
  cursor c = {(const char *)b + start, (const char *)b + start + hlen, what};
  DF_TRY(parse_dict(&c, h));
  h->data_offset = start + hlen;
  uint64_t bytes = df_dtype_bytes(h->dtype);
  for (uint32_t i = 0; i < h->ndim; i++) {
    uint64_t d = (uint64_t)h->shape[i];
    if (d && bytes > UINT64_MAX / d)
      return df_status_errorf(DF_EFORMAT, "%s: .npy shape is too large", what);
    bytes *= d;
  }
  if (bytes != len - h->data_offset)
    return df_status_errorf(DF_EFORMAT,
                            "%s: .npy data has %zu bytes, its header (dtype %s, %u dimensions) "
                            "says %llu",
                            what, len - h->data_offset, df_dtype_name(h->dtype), h->ndim,
                            (unsigned long long)bytes);
  h->data_bytes = (size_t)bytes;
  return df_status_ok();
}

df_status npy_read(const char *path, npy_header *h, uint8_t **data) {
  *data = NULL;
  uint8_t *bytes;
  size_t len;
  DF_TRY(read_whole_file(path, &bytes, &len));
  df_status s = npy_parse(bytes, len, path, h);
  if (s.code != DF_OK) {
    free(bytes);
    return s;
  }
  memmove(bytes, bytes + h->data_offset, h->data_bytes);
  *data = bytes;
  return df_status_ok();
}

df_status npy_write(const char *path, df_dtype dtype, uint32_t ndim, const int64_t *shape,
                    const void *data, size_t bytes) {
  const char *d = npy_descr(dtype);
  if (!d)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "cannot save '%s' as .npy: dtype %s has no standard numpy type "
                            "(save raw bytes without the .npy suffix)",
                            path, df_dtype_name(dtype));
  char dict[512];
  size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                                 "'shape': (",
                              d);
  for (uint32_t i = 0; i < ndim && n < sizeof dict; i++)
    n += (size_t)snprintf(dict + n, sizeof dict - n, "%lld%s", (long long)shape[i],
                          ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
  if (n < sizeof dict)
    n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
  if (n + 64 >= sizeof dict)
    return df_status_errorf(DF_EINVAL, "cannot save '%s': shape too long for a .npy header",
                            path);
  /* Pad with spaces and end with '\n' so the data starts 64-byte aligned. */
  size_t total = 10 + n + 1;
  size_t pad = (64 - total % 64) % 64;
  memset(dict + n, ' ', pad);
  n += pad;
  dict[n++] = '\n';
  uint8_t pre[10];
  memcpy(pre, MAGIC, sizeof MAGIC);
  pre[6] = 1;
  pre[7] = 0;
  pre[8] = (uint8_t)(n & 0xff);
  pre[9] = (uint8_t)(n >> 8);
  FILE *f = fopen(path, "wb");
  if (!f)
    return df_status_errorf(DF_EIO, "cannot create '%s': %s", path, strerror(errno));
  int bad = fwrite(pre, 1, sizeof pre, f) != sizeof pre || fwrite(dict, 1, n, f) != n ||
            (bytes && fwrite(data, 1, bytes, f) != bytes);
  bad |= fclose(f) != 0;
  if (bad)
    return df_status_errorf(DF_EIO, "cannot write '%s'", path);
  return df_status_ok();
}
