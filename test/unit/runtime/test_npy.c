/* df-run's .npy reader and writer (tools/df-run/npy.c): version 1.0 and
   2.0 headers, shapes (scalar, 1-d with a trailing comma, long forms),
   dtypes and byte orders, write/read round trips with 64-byte aligned
   data, and every refused header with its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "npy.h"

/* A .npy image: magic, version, header length, dict + '\n', data bytes. */
static size_t image(uint8_t *buf, int major, const char *dict, size_t data) {
  size_t n = strlen(dict) + 1, at = 0;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major;
  buf[7] = 0;
  at = 8;
  if (major == 1) {
    buf[at++] = (uint8_t)(n & 0xff);
    buf[at++] = (uint8_t)(n >> 8);
  } else {
    for (int i = 0; i < 4; i++)
      buf[at++] = (uint8_t)(n >> (8 * i));
  }
  memcpy(buf + at, dict, n - 1);
  at += n - 1;
  buf[at++] = '\n';
  memset(buf + at, 0x3c, data);
  return at + data;
}

static void parses(const char *dict, int major, size_t data, df_dtype dtype, uint32_t ndim,
                   const int64_t *shape) {
  uint8_t buf[512];
  size_t len = image(buf, major, dict, data);
  npy_header h;
  df_status s = npy_parse(buf, len, "t.npy", &h);
  if (s.code != DF_OK)
    fail_msg("%s: %s", dict, s.message);
  assert_int_equal(h.dtype, dtype);
  assert_int_equal(h.ndim, ndim);
  for (uint32_t i = 0; i < ndim; i++)
    assert_int_equal(h.shape[i], shape[i]);
  assert_int_equal(h.data_bytes, data);
  assert_int_equal(h.data_offset, len - data);
  assert_int_equal(h.major, major);
}

static void refuses(const uint8_t *buf, size_t len, df_code code, const char *fragment) {
  npy_header h;
  df_status s = npy_parse(buf, len, "t.npy", &h);
  if (s.code == DF_OK)
    fail_msg("expected '%s', got success", fragment);
  assert_int_equal(s.code, code);
  if (!strstr(s.message, fragment))
    fail_msg("message lacks '%s': %s", fragment, s.message);
}

static void refuses_dict(const char *dict, size_t data, df_code code, const char *fragment) {
  uint8_t buf[512];
  refuses(buf, image(buf, 1, dict, data), code, fragment);
}

static void headers(void **state) {
  (void)state;
  const int64_t s23[] = {2, 3}, s4[] = {4}, s0[] = {0};
  parses("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24,
         DF_DTYPE_FLOAT32, 2, s23);
  parses("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", 2, 8, DF_DTYPE_FLOAT16,
         1, s4);
  parses("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"=f8\"}", 1, 48,
         DF_DTYPE_FLOAT64, 2, s23);
  parses("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 1, 8, DF_DTYPE_INT64, 0,
         NULL);
  parses("{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }", 1, 0, DF_DTYPE_UINT8, 1,
         s0);
  parses("{'descr': '>i1', 'fortran_order': False, 'shape': (4,), }", 1, 4, DF_DTYPE_INT8, 1,
         s4);
  parses("{'descr': '<u4', 'fortran_order': False, 'shape': (4,), }", 3, 16, DF_DTYPE_UINT32,
         1, s4);
  parses("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", 1, 4, DF_DTYPE_BOOL, 1,
         s4);
}

static void bad_headers(void **state) {
  (void)state;
  refuses((const uint8_t *)"\x93NUMPX\x01\x00\x00\x00", 10, DF_EFORMAT, "not a .npy file");
  refuses((const uint8_t *)"\x93NUMPY\x04\x00\x10\x00", 10, DF_EUNSUPPORTED,
          "format version 4.0 is not supported");
  refuses((const uint8_t *)"\x93NUMPY\x01\x00\xff\x00{", 11, DF_EFORMAT,
          "header of 255 bytes runs past the file");
  refuses_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16,
               DF_EUNSUPPORTED, "Fortran order (fortran_order True)");
  refuses_dict("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", 16, DF_EUNSUPPORTED,
               "'>f8' is big-endian");
  refuses_dict("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4, DF_EUNSUPPORTED,
               "'<V2' is a raw void type (bfloat16");
  refuses_dict("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16,
               DF_EUNSUPPORTED, "'<c8' is not supported");
  refuses_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
               DF_EUNSUPPORTED, "structured");
  refuses_dict("{'descr': '<f4', 'shape': (2,), }", 8, DF_EFORMAT, "lacks 'fortran_order'");
  refuses_dict("{'descr': '<f4', 'fortran_order': False, }", 8, DF_EFORMAT, "lacks 'shape'");
  refuses_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", 8, DF_EFORMAT,
               "shape must be non-negative integers");
  refuses_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8,
               DF_EFORMAT, "unexpected key 'x'");
  refuses_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, DF_EFORMAT,
               "data has 8 bytes, its header (dtype float32, 1 dimensions) says 12");
  refuses_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3, 4, 5, 6, 7, 8, 9), }",
               4, DF_EUNSUPPORTED, "more than 8 dimensions");
}

static void round_trips(void **state) {
  (void)state;
  char path[] = "/tmp/df_test_npy_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fclose(fdopen(fd, "w"));
  const df_dtype dtypes[] = {DF_DTYPE_FLOAT16, DF_DTYPE_FLOAT32, DF_DTYPE_FLOAT64,
                             DF_DTYPE_INT8,    DF_DTYPE_INT32,   DF_DTYPE_UINT64,
                             DF_DTYPE_BOOL};
  const int64_t shapes[3][3] = {{2, 3, 5}, {7, 0, 0}, {0, 0, 0}};
  const uint32_t ndims[3] = {3, 1, 0};
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
    for (int k = 0; k < 3; k++) {
      size_t n = 1;
      for (uint32_t i = 0; i < ndims[k]; i++)
        n *= (size_t)shapes[k][i];
      size_t bytes = n * df_dtype_bytes(dtypes[d]);
      uint8_t data[256];
      for (size_t i = 0; i < bytes; i++)
        data[i] = (uint8_t)(i * 13 + d);
      df_status s = npy_write(path, dtypes[d], ndims[k], shapes[k], data, bytes);
      if (s.code != DF_OK)
        fail_msg("%s", s.message);
      npy_header h;
      uint8_t *back;
      s = npy_read(path, &h, &back);
      if (s.code != DF_OK)
        fail_msg("%s", s.message);
      assert_int_equal(h.dtype, dtypes[d]);
      assert_int_equal(h.ndim, ndims[k]);
      for (uint32_t i = 0; i < ndims[k]; i++)
        assert_int_equal(h.shape[i], shapes[k][i]);
      assert_int_equal(h.data_offset % 64, 0); /* aligned data, as numpy writes */
      assert_int_equal(h.data_bytes, bytes);
      if (bytes)
        assert_memory_equal(back, data, bytes);
      free(back);
    }
  df_status s = npy_write(path, DF_DTYPE_BFLOAT16, 0, NULL, "ab", 2);
  assert_int_equal(s.code, DF_EUNSUPPORTED);
  assert_non_null(strstr(s.message, "dtype bfloat16 has no standard numpy type"));
  assert_string_equal(npy_descr(DF_DTYPE_INT16), "<i2");
  assert_null(npy_descr(DF_DTYPE_FLOAT8_E5M2));
  assert_true(npy_is_path("a/b.npy"));
  assert_false(npy_is_path(".npy.bin"));
  remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(headers),
      cmocka_unit_test(bad_headers),
      cmocka_unit_test(round_trips),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
