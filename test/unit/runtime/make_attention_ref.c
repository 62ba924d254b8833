/* Inputs and reference output of the seed attention plan with the C
   handlers of examples/seed/attention_handlers.c, without Python (the
   same contract as scripts/gpu/attention_inputs.py, another generator):
   head dim D = 16, KV stride 4096, scale 1/4.
     q.bin  float16 [tasks][16]         uniform in [-1, 1), seeded
     k.bin  float16 [tasks][4096][16]
     v.bin  float16 [tasks][4096][16]
     REF    float32 [tasks][16]: per task t, softmax over its first L_t
            keys of q.k/4 and the weighted sum of v, in double precision
            from the float16-rounded inputs
   usage: make_attention_ref OUTDIR [--ref REF] L0 L1 ... (REF default
   o_ref.bin; the inputs do not depend on the lengths). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 16, KV = 4096, MAX_TASKS = 64 };

/* splitmix64 */
static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A float16 value rounded from a uniform double in [-1, 1). */
static _Float16 uniform_f16(uint64_t *s) {
  double u = (double)(next(s) >> 11) * (1.0 / 9007199254740992.0);
  return (_Float16)(2.0 * u - 1.0);
}

static int write_file(const char *dir, const char *name, const void *data, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "make_attention_ref: cannot create '%s': %s\n", path, strerror(errno));
    return 1;
  }
  int bad = fwrite(data, 1, bytes, f) != bytes;
  bad |= fclose(f) != 0;
  if (bad)
    fprintf(stderr, "make_attention_ref: cannot write '%s'\n", path);
  return bad;
}

static void reference(const _Float16 *q, const _Float16 *k, const _Float16 *v, uint32_t len,
                      double *s, float *out) {
  double m = -INFINITY, z = 0, acc[D] = {0};
  for (uint32_t j = 0; j < len; j++) {
    double dot = 0;
    for (int d = 0; d < D; d++)
      dot += (double)q[d] * (double)k[(size_t)j * D + d];
    s[j] = dot * 0.25;
    m = s[j] > m ? s[j] : m;
  }
  for (uint32_t j = 0; j < len; j++) {
    double w = exp(s[j] - m);
    z += w;
    for (int d = 0; d < D; d++)
      acc[d] += w * (double)v[(size_t)j * D + d];
  }
  for (int d = 0; d < D; d++)
    out[d] = (float)(acc[d] / z);
}

int main(int argc, char **argv) {
  const char *usage = "usage: make_attention_ref OUTDIR [--ref REF] L0 L1 ...\n";
  if (argc < 3) {
    fputs(usage, stderr);
    return 2;
  }
  const char *dir = argv[1], *ref_name = "o_ref.bin";
  int first = 2;
  if (strcmp(argv[2], "--ref") == 0) {
    if (argc < 5) {
      fputs(usage, stderr);
      return 2;
    }
    ref_name = argv[3];
    first = 4;
  }
  uint32_t tasks = (uint32_t)(argc - first), lens[MAX_TASKS];
  if (tasks > MAX_TASKS) {
    fprintf(stderr, "make_attention_ref: at most %d lengths\n", MAX_TASKS);
    return 2;
  }
  for (uint32_t t = 0; t < tasks; t++) {
    char *end;
    unsigned long l = strtoul(argv[first + (int)t], &end, 10);
    if (end == argv[first + (int)t] || *end || l == 0 || l > KV) {
      fprintf(stderr, "make_attention_ref: length '%s' is not in 1..%d\n", argv[first + (int)t],
              KV);
      return 2;
    }
    lens[t] = (uint32_t)l;
  }
  size_t qn = (size_t)tasks * D, kn = (size_t)tasks * KV * D;
  _Float16 *q = malloc(qn * sizeof *q), *k = malloc(kn * sizeof *k), *v = malloc(kn * sizeof *v);
  float *o = malloc((size_t)tasks * D * sizeof *o);
  double *scores = malloc(KV * sizeof *scores);
  if (!q || !k || !v || !o || !scores) {
    fprintf(stderr, "make_attention_ref: out of memory\n");
    return 1;
  }
  uint64_t state = 1234;
  for (size_t i = 0; i < qn; i++)
    q[i] = uniform_f16(&state);
  for (size_t i = 0; i < kn; i++)
    k[i] = uniform_f16(&state);
  for (size_t i = 0; i < kn; i++)
    v[i] = uniform_f16(&state);
  for (uint32_t t = 0; t < tasks; t++)
    reference(q + (size_t)t * D, k + (size_t)t * KV * D, v + (size_t)t * KV * D, lens[t],
              scores, o + (size_t)t * D);
  int rc = write_file(dir, "q.bin", q, qn * sizeof *q);
  rc |= write_file(dir, "k.bin", k, kn * sizeof *k);
  rc |= write_file(dir, "v.bin", v, kn * sizeof *v);
  rc |= write_file(dir, ref_name, o, (size_t)tasks * D * sizeof *o);
  free(q);
  free(k);
  free(v);
  free(o);
  free(scores);
  return rc;
}
