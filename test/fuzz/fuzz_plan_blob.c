/* libFuzzer target for the plan-blob reader. Each input is read as is,
   then again with its total length and checksum patched to fit, so that
   mutations reach the section and record checks behind the checksum.
   Whatever the reader accepts must write, re-read and re-write to the
   same bytes, and dump without faults. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/blob.h"

static void check(int cond) {
  if (!cond)
    __builtin_trap();
}

static void exercise(const uint8_t *data, size_t size) {
  df_packed *k;
  df_program *prog;
  df_status s = df_blob_read(data, size, NULL, &k, &prog);
  if (s.code != DF_OK) {
    check(s.code == DF_EFORMAT || s.code == DF_ENOMEM);
    check(k == NULL && prog == NULL && s.message[0] != '\0');
    return;
  }
  uint8_t *b1, *b2;
  size_t n1, n2;
  check(df_blob_write(k, prog, NULL, &b1, &n1).code == DF_OK);
  df_packed *k2;
  df_program *prog2;
  check(df_blob_read(b1, n1, NULL, &k2, &prog2).code == DF_OK);
  check(df_blob_write(k2, prog2, NULL, &b2, &n2).code == DF_OK);
  check(n1 == n2 && memcmp(b1, b2, n1) == 0);
  FILE *null = fopen("/dev/null", "w");
  if (null) {
    check(df_packed_dump_text(k, null).code == DF_OK);
    check(df_packed_dump_json(k, null).code == DF_OK);
    if (prog)
      check(df_program_dump(prog, null).code == DF_OK);
    fclose(null);
  }
  free(b1);
  free(b2);
  df_packed_destroy(k);
  df_packed_destroy(k2);
  df_program_destroy(prog);
  df_program_destroy(prog2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  exercise(data, size);
  if (size >= DF_BLOB_HEADER_BYTES + DF_BLOB_CHECKSUM_BYTES) {
    uint8_t *copy = malloc(size);
    if (!copy)
      return 0;
    memcpy(copy, data, size);
    uint64_t total = size;
    for (int i = 0; i < 8; i++)
      copy[24 + i] = (uint8_t)(total >> (8 * i));
    df_blob_reseal(copy, size);
    exercise(copy, size);
    free(copy);
  }
  return 0;
}
