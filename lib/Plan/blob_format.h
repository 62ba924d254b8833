/* Plan blob internals shared by the writer, the reader and the dumps:
   little-endian helpers, record sizes and field-name tables (internal). */
#ifndef DF_PLAN_BLOB_FORMAT_H
#define DF_PLAN_BLOB_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "df/blob.h"

/* Record sizes of the fixed-size sections. */
enum {
  DF_BLOB_HANDLER_WORDS = 18, /* 16 value words, name, symbol */
  DF_BLOB_HANDLER_BYTES = 4 * DF_BLOB_HANDLER_WORDS,
  DF_BLOB_NAMED_BYTES = 12,   /* name, index, kind */
  DF_BLOB_TOPOLOGY_WORDS = 8,  /* sm_count, cluster_size, shared_slot_bytes,
                                  global_staging_bytes, scratch_bytes,
                                  primary_handler_count, 0, 0 */
  DF_BLOB_FINGERPRINT_BYTES = 65,
  DF_BLOB_BARRIER_HEAD_WORDS = 4, /* barrier_count, slot_count, comm_count,
                                     ack_count */
};

/* Words of each ABI record; the structs are exactly these u32 arrays. */
enum {
  DF_INSTR_WORDS = sizeof(df_abi_instr) / 4,
  DF_SLOT_WORDS = sizeof(df_abi_slot) / 4,
  DF_COMM_WORDS = sizeof(df_abi_comm) / 4,
  DF_ARGS_WORDS = sizeof(df_abi_args) / 4,
};

/* abi.h field names of each record, in word order. */
extern const char *const df_instr_field_names[DF_INSTR_WORDS];
extern const char *const df_slot_field_names[DF_SLOT_WORDS];
extern const char *const df_comm_field_names[DF_COMM_WORDS];
extern const char *const df_args_field_names[DF_ARGS_WORDS];

/* The u32 scalars of df_launch_package in blob order (§5.5 names); the
   blob stores them, then needs_flag_reset, barrier_init_count and the
   three barrier-init arrays. */
typedef struct df_blob_u32_field {
  const char *name;
  size_t offset;
} df_blob_u32_field;
extern const df_blob_u32_field df_launch_u32_fields[];
extern const uint32_t df_launch_u32_field_count;

static inline uint32_t *df_launch_u32(df_launch_package *l, uint32_t i) {
  return (uint32_t *)((char *)l + df_launch_u32_fields[i].offset);
}
static inline uint32_t df_launch_u32_get(const df_launch_package *l, uint32_t i) {
  uint32_t v;
  memcpy(&v, (const char *)l + df_launch_u32_fields[i].offset, 4);
  return v;
}

/* Enumeration names used by the dumps (independent of other modules so a
   dump never fails on a value another table lacks). */
const char *df_blob_abi_opcode_name(uint32_t op);
const char *df_blob_iter_mode_name(uint32_t m);
const char *df_blob_arity_name(uint32_t c);

static inline uint32_t df_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static inline uint64_t df_le64(const uint8_t *p) {
  return (uint64_t)df_le32(p) | (uint64_t)df_le32(p + 4) << 32;
}
static inline void df_put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline void df_put_le64(uint8_t *p, uint64_t v) {
  df_put_le32(p, (uint32_t)v);
  df_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Record <-> words: the ABI structs have no padding (abi.h asserts). */
static inline void df_record_words(const void *rec, uint32_t *w, uint32_t n) {
  memcpy(w, rec, (size_t)n * 4);
}
static inline void df_words_record(void *rec, const uint32_t *w, uint32_t n) {
  memcpy(rec, w, (size_t)n * 4);
}

/* A growing output buffer; the first allocation failure sticks. */
typedef struct df_blob_buf {
  const df_allocator *a;
  uint8_t *data;
  size_t len, cap;
  bool failed;
} df_blob_buf;
void df_blob_buf_bytes(df_blob_buf *b, const void *p, size_t n);
void df_blob_buf_zeros(df_blob_buf *b, size_t n);
void df_blob_buf_u32(df_blob_buf *b, uint32_t v);
void df_blob_buf_i32(df_blob_buf *b, int32_t v);
/* A fixed-width field written in place (the fingerprint): the bytes up
   to the NUL, zero padded; the caller has checked it holds a NUL. */
void df_blob_buf_str(df_blob_buf *b, const char *s, size_t width);

/* Strings are written once into a pool (the strings section) and
   referenced by byte offset. Returns the offset of `s` (at most
   `width`-1 bytes, the caller has checked), reusing an equal string
   already in the pool. */
uint32_t df_blob_pool_add(df_blob_buf *pool, const char *s, size_t width);

/* The decoded strings section. */
typedef struct df_blob_strings {
  const uint8_t *data;
  uint32_t len;
} df_blob_strings;

/* Copy the string at `off` into a zeroed field of `width` bytes. On
   failure returns false and says why in `why` ("string offset 9 out of
   range (4 bytes of strings)", "is longer than 63 bytes", ...). */
bool df_blob_string(const df_blob_strings *t, uint32_t off, char *dst, size_t width,
                    char *why, size_t why_cap);

/* True when a fixed-width field holds a NUL. */
static inline bool df_blob_str_ok(const char *s, size_t width) {
  return memchr(s, 0, width) != NULL;
}

/* Checks of a packed plan shared by the reader (DF_EFORMAT) and the
   writer (which refuses to encode what the reader would reject). The
   message names the record and rule without a "plan blob" prefix. */
df_status df_blob_check_packed(const df_packed *k);

/* The program section (blob_program.c): the writer's precondition, the
   encoder, and the validating decoder. */
df_status df_blob_check_program(const df_program *p);
void df_blob_put_program(df_blob_buf *b, df_blob_buf *pool, const df_program *p);
df_status df_blob_get_program(const uint8_t *data, size_t len,
                              const df_blob_strings *strings,
                              const df_allocator *a, df_program **out);

#endif
