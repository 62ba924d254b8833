/* Float64 reference of examples/attention_gqa for df-run's random inputs:
   regenerates exactly the tensors df-run makes from
   random:float16:SEQSx32x128:QSEED (Q) and random:float16:SEQSxLMAXx8x128
   :KSEED / :VSEED (K, V) (element i depends on the seed and i alone,
   tools/df-run/host_random.c), only the rows each sequence uses, and
   writes softmax(q k^T / sqrt(128)) v over the first L(seq) keys as a
   float64 .npy of shape [SEQS][32][128].
   usage: gqa_reference OUT.npy LMAX QSEED KSEED VSEED L0 [L1 ...] */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_tensor.h"
#include "npy.h"

enum { D = 128, HQ = 32, HKV = 8, G = HQ / HKV, ROW = HKV * D };

typedef struct job {
  uint32_t seqs, lmax;
  uint64_t qseed, kseed, vseed;
  const uint32_t *lens;
  double *out;
  uint32_t next; /* next sequence (guarded by lock) */
  pthread_mutex_t lock;
  int failed;
} job;

/* Rows [0, len) of sequence s of a K/V tensor, as floats [len][8][128]. */
static float *rows(const job *jb, uint64_t seed, uint32_t s, uint32_t len) {
  size_t n = (size_t)len * ROW;
  uint16_t *h = malloc(n * 2);
  float *f = malloc(n * sizeof *f);
  if (!h || !f) {
    free(h);
    free(f);
    return NULL;
  }
  host_random_fill(DF_DTYPE_FLOAT16, seed, (size_t)s * jb->lmax * ROW, n, (uint8_t *)h, 1);
  for (size_t i = 0; i < n; i++)
    f[i] = (float)host_value_load(DF_DTYPE_FLOAT16, (const uint8_t *)h, i);
  free(h);
  return f;
}

static int one_seq(job *jb, uint32_t s) {
  uint32_t len = jb->lens[s];
  uint16_t qh[HQ * D];
  host_random_fill(DF_DTYPE_FLOAT16, jb->qseed, (size_t)s * HQ * D, HQ * D, (uint8_t *)qh, 1);
  float *k = rows(jb, jb->kseed, s, len), *v = rows(jb, jb->vseed, s, len);
  double *p = malloc((size_t)len * sizeof *p);
  if (!k || !v || !p) {
    free(k);
    free(v);
    free(p);
    return 1;
  }
  const double scale = 1.0 / sqrt((double)D);
  for (uint32_t hq = 0; hq < HQ; hq++) {
    uint32_t hk = hq / G;
    double q[D];
    for (int d = 0; d < D; d++)
      q[d] = host_value_load(DF_DTYPE_FLOAT16, (const uint8_t *)qh, (size_t)hq * D + d);
    double mx = -INFINITY;
    for (uint32_t j = 0; j < len; j++) {
      const float *kr = k + (size_t)j * ROW + (size_t)hk * D;
      double s2 = 0;
      for (int d = 0; d < D; d++)
        s2 += q[d] * kr[d];
      p[j] = s2 * scale;
      mx = p[j] > mx ? p[j] : mx;
    }
    double z = 0, o[D] = {0};
    for (uint32_t j = 0; j < len; j++) {
      double w = exp(p[j] - mx);
      z += w;
      const float *vr = v + (size_t)j * ROW + (size_t)hk * D;
      for (int d = 0; d < D; d++)
        o[d] += w * vr[d];
    }
    for (int d = 0; d < D; d++)
      jb->out[((size_t)s * HQ + hq) * D + d] = o[d] / z;
  }
  free(k);
  free(v);
  free(p);
  return 0;
}

static void *worker(void *arg) {
  job *jb = arg;
  for (;;) {
    pthread_mutex_lock(&jb->lock);
    uint32_t s = jb->next++;
    pthread_mutex_unlock(&jb->lock);
    if (s >= jb->seqs)
      return NULL;
    if (one_seq(jb, s))
      jb->failed = 1;
  }
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: gqa_reference OUT.npy LMAX QSEED KSEED VSEED L0 [L1 ...]\n");
    return 2;
  }
  job jb;
  memset(&jb, 0, sizeof jb);
  jb.lmax = (uint32_t)strtoul(argv[2], NULL, 10);
  jb.qseed = strtoull(argv[3], NULL, 0);
  jb.kseed = strtoull(argv[4], NULL, 0);
  jb.vseed = strtoull(argv[5], NULL, 0);
  jb.seqs = (uint32_t)(argc - 6);
  uint32_t *lens = malloc(sizeof *lens * jb.seqs);
  jb.out = calloc((size_t)jb.seqs * HQ * D, sizeof *jb.out);
  if (!lens || !jb.out)
    return 1;
  for (uint32_t s = 0; s < jb.seqs; s++) {
    lens[s] = (uint32_t)strtoul(argv[6 + s], NULL, 10);
    if (!lens[s] || lens[s] > jb.lmax) {
      fprintf(stderr, "gqa_reference: length %u of sequence %u is not in 1..%u\n", lens[s], s,
              jb.lmax);
      return 2;
    }
  }
  jb.lens = lens;
  pthread_mutex_init(&jb.lock, NULL);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t threads = cpus > 1 ? (uint32_t)(cpus > 32 ? 32 : cpus) : 1;
  pthread_t tid[32];
  for (uint32_t t = 0; t < threads; t++)
    pthread_create(&tid[t], NULL, worker, &jb);
  for (uint32_t t = 0; t < threads; t++)
    pthread_join(tid[t], NULL);
  if (jb.failed) {
    fprintf(stderr, "gqa_reference: out of memory\n");
    return 1;
  }
  int64_t shape[3] = {jb.seqs, HQ, D};
  df_status s = npy_write(argv[1], DF_DTYPE_FLOAT64, 3, shape, jb.out,
                          sizeof *jb.out * jb.seqs * HQ * D);
  if (s.code != DF_OK) {
    fprintf(stderr, "gqa_reference: %s\n", s.message);
    return 1;
  }
  free(lens);
  free(jb.out);
  return 0;
}
