/* SHA-256 (FIPS 180-4). The plan fingerprint hashes every plan each
   decode step, so on x86-64 the compression uses the SHA extensions when
   the CPU reports them (several times faster than the portable rounds). */
#include "sha256.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DF_SHA_NI 1
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress_portable(uint32_t h[8], const uint8_t *p, size_t blocks) {
  for (; blocks--; p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
      w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
             (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                    K[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
    h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
}

#ifdef DF_SHA_NI
/* Four rounds per group g; the message schedule of group g+1 is
   finished (msg2) in group g and started (msg1) three groups ahead. */
__attribute__((target("sha,sse4.1"))) static void compress_ni(uint32_t h[8], const uint8_t *p,
                                                                size_t blocks) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);
  __m128i st1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);
  __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);  /* ABEF */
  st1 = _mm_blend_epi16(st1, tmp, 0xF0);       /* CDGH */
  for (; blocks--; p += 64) {
    __m128i save0 = st0, save1 = st1, w[4], msg;
#pragma GCC unroll 16
    for (int g = 0; g < 16; g++) {
      if (g < 4)
        w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
      msg = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
      st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
      if (g >= 3 && g <= 14) {
        __m128i t = _mm_alignr_epi8(w[g & 3], w[(g - 1) & 3], 4);
        w[(g + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(w[(g + 1) & 3], t), w[g & 3]);
      }
      st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(msg, 0x0E));
      if (g >= 1 && g <= 12)
        w[(g - 1) & 3] = _mm_sha256msg1_epu32(w[(g - 1) & 3], w[g & 3]);
    }
    st0 = _mm_add_epi32(st0, save0);
    st1 = _mm_add_epi32(st1, save1);
  }
  tmp = _mm_shuffle_epi32(st0, 0x1B);       /* FEBA */
  st1 = _mm_shuffle_epi32(st1, 0xB1);       /* DCHG */
  st0 = _mm_blend_epi16(tmp, st1, 0xF0);    /* DCBA */
  st1 = _mm_alignr_epi8(st1, tmp, 8);       /* HGFE */
  _mm_storeu_si128((__m128i *)&h[0], st0);
  _mm_storeu_si128((__m128i *)&h[4], st1);
}
#endif

static void compress(df_sha256 *s, const uint8_t *p, size_t blocks) {
#ifdef DF_SHA_NI
  if (s->accel) {
    compress_ni(s->h, p, blocks);
    return;
  }
#endif
  compress_portable(s->h, p, blocks);
}

void df_sha256_init_portable(df_sha256 *s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof iv);
  s->bytes = 0;
  s->fill = 0;
  s->accel = false;
}

void df_sha256_init(df_sha256 *s) {
  df_sha256_init_portable(s);
#ifdef DF_SHA_NI
  __builtin_cpu_init();
  s->accel = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1");
#endif
}

void df_sha256_update(df_sha256 *s, const void *data, size_t n) {
  const uint8_t *p = data;
  s->bytes += n;
  if (s->fill) {
    size_t take = 64 - s->fill < n ? 64 - s->fill : n;
    memcpy(s->buf + s->fill, p, take);
    s->fill += (uint32_t)take;
    p += take;
    n -= take;
    if (s->fill < 64)
      return;
    compress(s, s->buf, 1);
    s->fill = 0;
  }
  if (n >= 64) {
    compress(s, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
  }
  memcpy(s->buf, p, n);
  s->fill = (uint32_t)n;
}

void df_sha256_final(df_sha256 *s, uint8_t digest[32]) {
  uint64_t bits = s->bytes * 8;
  uint8_t pad[72] = {0x80};
  size_t padlen = (s->fill < 56 ? 56 : 120) - s->fill;
  for (int i = 0; i < 8; i++)
    pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
  uint64_t keep = s->bytes;
  df_sha256_update(s, pad, padlen + 8);
  s->bytes = keep;
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++)
      digest[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

void df_sha256_hex(const uint8_t digest[32], char hex[65]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[digest[i] >> 4];
    hex[2 * i + 1] = digits[digest[i] & 15];
  }
  hex[64] = '\0';
}
