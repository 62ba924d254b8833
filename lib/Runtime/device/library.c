/* df's built-in handler library (docs/implementations.md). Each entry reads
   a descriptor of the operator's intermediate (df_library_descriptor in
   lib/Plan/impl_library.c) that the code generator passes from a small
   generated wrapper; compiled for nvptx64 into the device runtime and for
   the host into the host accessor bitcode. Unused entries are dropped
   when the kernel is internalized. */
#include "df/device.h"

/* Payload element codes of the descriptors. */
enum { LIB_F16 = 0, LIB_BF16 = 1, LIB_F32 = 2 };

static inline float lib_exp(float x) {
#if defined(__NVPTX__)
  return __nvvm_ex2_approx_f(x * 1.4426950408889634f);
#else
  return __builtin_expf(x);
#endif
}

static inline float lib_log(float x) {
#if defined(__NVPTX__)
  return __nvvm_lg2_approx_f(x) * 0.6931471805599453f;
#else
  return __builtin_logf(x);
#endif
}

static inline float lib_load(const uint8_t *base, uint32_t code, uint32_t i) {
  if (code == LIB_F16)
    return (float)((const _Float16 *)base)[i];
  if (code == LIB_BF16) {
    uint32_t bits = (uint32_t)((const uint16_t *)base)[i] << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  }
  return ((const float *)base)[i];
}

static inline void lib_store(uint8_t *base, uint32_t code, uint32_t i, float v) {
  if (code == LIB_F16) {
    ((_Float16 *)base)[i] = (_Float16)v;
  } else if (code == LIB_BF16) {
    uint32_t bits;
    __builtin_memcpy(&bits, &v, 4);
    /* round to nearest even; NaN stays a quiet NaN */
    uint16_t h = v != v ? (uint16_t)0x7fc0
                        : (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    ((uint16_t *)base)[i] = h;
  } else {
    ((float *)base)[i] = v;
  }
}

/* lse_combine, descriptor {lse offset, heads H, o offset, o code, o
   elements per head}: per head, weights exp(lse_i - max), o = sum w_i o_i /
   sum w_i, lse = max + log(sum w_i). All -inf inputs give lse -inf, o 0. */
static inline void lse_combine(const df_ctx *c, const uint32_t *d, uint32_t n) {
  uint8_t *out = df_ctx_output(c);
  uint32_t heads = d[1], per = d[4], code = d[3];
  uint32_t total = heads * per;
  for (uint32_t e = df_ctx_thread(c); e < total; e += df_ctx_threads(c)) {
    uint32_t h = e / per;
    float mx = -__builtin_inff();
    for (uint32_t i = 0; i < n; i++) {
      float l = ((const float *)((const uint8_t *)df_ctx_input(c, i) + d[0]))[h];
      mx = l > mx ? l : mx;
    }
    float sum = 0.0f, acc = 0.0f;
    if (mx != -__builtin_inff())
      for (uint32_t i = 0; i < n; i++) {
        const uint8_t *in = df_ctx_input(c, i);
        float w = lib_exp(((const float *)(in + d[0]))[h] - mx);
        sum += w;
        acc += w * lib_load(in + d[2], code, e);
      }
    lib_store(out + d[2], code, e, sum > 0.0f ? acc / sum : 0.0f);
  }
  /* every thread has read every input's lse before any is overwritten
     (the output may alias an input) */
  df_ctx_barrier(c);
  for (uint32_t h = df_ctx_thread(c); h < heads; h += df_ctx_threads(c)) {
    float mx = -__builtin_inff(), sum = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
      float l = ((const float *)((const uint8_t *)df_ctx_input(c, i) + d[0]))[h];
      mx = l > mx ? l : mx;
    }
    if (mx != -__builtin_inff())
      for (uint32_t i = 0; i < n; i++)
        sum += lib_exp(((const float *)((const uint8_t *)df_ctx_input(c, i) + d[0]))[h] - mx);
    /* head h's lse is read and written by this thread only */
    ((float *)(out + d[0]))[h] = mx == -__builtin_inff() ? mx : mx + lib_log(sum);
  }
  df_ctx_barrier(c);
}

void df_lib_lse_combine_passthrough(const df_ctx *c, const uint32_t *d) { lse_combine(c, d, 1); }
void df_lib_lse_combine_binary(const df_ctx *c, const uint32_t *d) { lse_combine(c, d, 2); }
void df_lib_lse_combine_generic(const df_ctx *c, const uint32_t *d) {
  lse_combine(c, d, df_ctx_input_count(c));
}

/* copy, descriptor {o offset, o code, o elements, output tensor}: the
   payload of the task's intermediate into row task_id of the output,
   converted to its dtype (float16, bfloat16 or float32). */
void df_lib_copy(const df_ctx *c, const uint32_t *d) {
  const uint8_t *in = (const uint8_t *)df_ctx_input(c, 0) + d[0];
  uint32_t t = d[3], n = d[2];
  uint32_t bits = df_ctx_tensor_bits(c, t), dt = df_ctx_tensor_dtype(c, t);
  uint32_t code = dt == DF_TENSOR_DTYPE_BFLOAT ? LIB_BF16 : bits == 16 ? LIB_F16 : LIB_F32;
  uint8_t *out = (uint8_t *)df_ctx_tensor(c, t) +
                 (uint64_t)df_ctx_task_id(c) * n * (code == LIB_F32 ? 4u : 2u);
  for (uint32_t e = df_ctx_thread(c); e < n; e += df_ctx_threads(c))
    lib_store(out, code, e, lib_load(in, d[1], e));
}
