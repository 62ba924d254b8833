/* Cooperative byte copy by all threads of the CTA (generic addresses:
   shared slots, scratch, global staging). 16-byte vectors when both ends
   are 16-aligned, then a byte tail; bytes only otherwise. No barrier: the
   caller orders the copy against its producers and consumers. */
#include "runtime.h"

void df_rt_copy(const df_rt *rt, uint8_t *dst, const uint8_t *src, uint32_t n) {
  if (dst == src || n == 0)
    return;
  uint32_t done = 0;
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0) {
    uint32_t vectors = n / 16;
    df_v4u32 *d = (df_v4u32 *)dst;
    const df_v4u32 *s = (const df_v4u32 *)src;
    for (uint32_t i = rt->tid; i < vectors; i += rt->threads)
      d[i] = s[i];
    done = vectors * 16;
  }
  for (uint32_t i = done + rt->tid; i < n; i += rt->threads)
    dst[i] = src[i];
}
