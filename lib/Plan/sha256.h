/* SHA-256 (FIPS 180-4), internal to lib/Plan: streaming interface; the
   compression uses the x86 SHA extensions when the CPU has them. */
#ifndef DF_PLAN_SHA256_H
#define DF_PLAN_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct df_sha256 {
  uint32_t h[8];
  uint64_t bytes;
  uint8_t buf[64];
  uint32_t fill;
  bool accel; /* use the SHA extensions */
} df_sha256;

void df_sha256_init(df_sha256 *s);
/* As df_sha256_init, never using the SHA extensions (tests compare). */
void df_sha256_init_portable(df_sha256 *s);
void df_sha256_update(df_sha256 *s, const void *data, size_t n);
void df_sha256_final(df_sha256 *s, uint8_t digest[32]);
/* Lower-case hex of a digest, NUL-terminated. */
void df_sha256_hex(const uint8_t digest[32], char hex[65]);

#endif
