/* Float64 reference of examples/seed/moe_reshared.mlir with
   examples/seed/moe_handlers.c for df-run's random inputs: regenerates
   Input random:float16:TOKENSxKIN:S1, W1 random:float16:EXPERTSxFULLxKIN:S2
   and W2 random:float16:EXPERTSxFULLxFULL:S3 (tools/df-run/host_random.c)
   and writes Output[e][t][c] = sum_j relu(Input[t] . W1[e][j]) * W2[e][c][j]
   as a float64 .npy [EXPERTS][TOKENS][FULL]; FULL (the handlers'
   MOE_FULL) defaults to 16.
   usage: moe_reference OUT.npy EXPERTS TOKENS KIN S1 S2 S3 [FULL] */
#include <stdio.h>
#include <stdlib.h>

#include "host_tensor.h"
#include "npy.h"

static double *values(uint64_t seed, size_t n) {
  uint16_t *h = malloc(n * 2);
  double *v = malloc(n * sizeof *v);
  if (!h || !v)
    exit(1);
  host_random_fill(DF_DTYPE_FLOAT16, seed, 0, n, (uint8_t *)h, 1);
  for (size_t i = 0; i < n; i++)
    v[i] = host_value_load(DF_DTYPE_FLOAT16, (const uint8_t *)h, i);
  free(h);
  return v;
}

int main(int argc, char **argv) {
  if (argc != 8 && argc != 9) {
    fprintf(stderr, "usage: moe_reference OUT.npy EXPERTS TOKENS KIN S1 S2 S3 [FULL]\n");
    return 2;
  }
  size_t E = strtoul(argv[2], NULL, 10), T = strtoul(argv[3], NULL, 10);
  size_t K = strtoul(argv[4], NULL, 10);
  size_t F = argc == 9 ? strtoul(argv[8], NULL, 10) : 16;
  if (F == 0 || F > 256) {
    fprintf(stderr, "moe_reference: FULL must be in 1..256, got %s\n", argv[8]);
    return 2;
  }
  double *in = values(strtoull(argv[5], NULL, 0), T * K);
  double *w1 = values(strtoull(argv[6], NULL, 0), E * F * K);
  double *w2 = values(strtoull(argv[7], NULL, 0), E * F * F);
  double *out = malloc(sizeof *out * E * T * F);
  if (!out)
    return 1;
  for (size_t e = 0; e < E; e++)
    for (size_t t = 0; t < T; t++) {
      double up[256];
      for (size_t j = 0; j < F; j++) {
        double a = 0;
        for (size_t k = 0; k < K; k++)
          a += in[t * K + k] * w1[(e * F + j) * K + k];
        up[j] = a > 0 ? a : 0;
      }
      for (size_t c = 0; c < F; c++) {
        double a = 0;
        for (size_t j = 0; j < F; j++)
          a += up[j] * w2[(e * F + c) * F + j];
        out[(e * T + t) * F + c] = a;
      }
    }
  int64_t shape[3] = {(int64_t)E, (int64_t)T, (int64_t)F};
  df_status s = npy_write(argv[1], DF_DTYPE_FLOAT64, 3, shape, out, sizeof *out * E * T * F);
  if (s.code != DF_OK) {
    fprintf(stderr, "moe_reference: %s\n", s.message);
    return 1;
  }
  free(in);
  free(w1);
  free(w2);
  free(out);
  return 0;
}
