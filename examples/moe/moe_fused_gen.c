/* Routing, task table and (optionally) inputs plus a float64 reference for
   examples/moe/moe_fused.mlir.

   Routing: every token picks top-2 distinct experts with Zipf-skewed
   probabilities p(rank r) ~ 1 / (r + 1)^zipf over a seeded permutation of
   the experts, and routing weights softmax(two uniform logits in [0, 2)).
   Tasks: each expert's rows (tokens in ascending order) are cut into
   ceil(n / tile) tiles of balanced sizes; the tasks are packed onto the
   clusters largest first, each to the least-loaded cluster that has room
   (at most --per-cluster tasks; cost = 1 + tokens / tile, i.e. the weight
   read plus the tensor-core work), and laid out so that task position
   p = k * clusters + c is cluster c's k-th task (the stage-graph
   scheduler puts task p on cluster p mod clusters); holes become empty
   tasks (count 0). A CTA keeps every task's slots, so --per-cluster bounds
   the shared memory. --tile auto takes the smallest of AUTO_TILES whose
   tiles all fit one round on the clusters (64 when none does): small
   tiles keep the GEMMs light and one round keeps every cluster busy once
   (bench/moe/HISTORY.md, run U: the best measured tile at 128, 256, 512
   and 1024 tokens on 66 clusters of 2 was 16, 16, 20 and 40).

   Files in DIR:
     tasks.bin    int32 [tasks][4]  expert, first row, count, 0
     tokens.bin   int32 [2T]        token of each row (rows grouped by expert)
     weights.bin  float32 [2T]      routing weight of each row
     topk.bin     int32 [T][2]      the experts of each token (for other tools)
     topw.bin     float32 [T][2]    their weights
     schedule.txt df-schedule options: task-extents and range-lengths (no newline)
     ntasks       the number of task positions (rows of tasks.bin)
     sync.bin     int32 [8]         the handlers' Sync words before and
                                    after a launch: T, the task positions,
                                    the first round's (positions below
                                    the cluster count), zeros
                                    (moe_zero_output.h)
   With --inputs also X.bin bf16 [T][H] (uniform [-1, 1)), Wgu.bin bf16
   [E][2][I][H] and Wd.bin bf16 [E][H][I] (uniform [-1, 1) / sqrt(fan-in)),
   and ref.npy float64 [T][H] = sum_k w_k * Wd[e_k] (SiLU(Wg x) * (Wu x))
   computed from the bf16-rounded values; with --packed the weight files
   hold the same values in the handlers' -DMOE_PACKED layout (pack_tiles).
   --shards S: the tasks' cluster size (the handlers' MOE_CS); down's range
   length in schedule.txt is hidden rounded up to whole 16-column m-tiles
   per shard (2064 for 3 shards: the handlers skip the columns past
   hidden), and inter must split into S shards of 32-column chunks.
   usage: moe_fused_gen DIR --experts E --tokens T --clusters C [--tile 64|auto]
          [--per-cluster 2] [--zipf 1.0] [--seed 1] [--hidden 2048]
          [--inter 768] [--shards 1] [--inputs [--packed]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_tensor.h"
#include "npy.h"

typedef struct gen_opts {
  const char *dir;
  uint32_t experts, tokens, clusters, tile, per_cluster, hidden, inter, shards;
  double zipf;
  uint64_t seed;
  int inputs, packed, tile_auto;
} gen_opts;

/* --tile auto's candidates: whole n-tiles of the handlers (2, 3 with
   MOE_NT3, 4, 5, 6, 8 of 8 rows; 20 rows: 3 n-tiles with fewer rows in the
   largest tile than 24), at most the handlers' 64. */
static const uint32_t AUTO_TILES[] = {16, 20, 24, 32, 40, 48, 64};

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

static void *xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    fprintf(stderr, "moe_fused_gen: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static int write_file(const gen_opts *o, const char *name, const void *data, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", o->dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
    fprintf(stderr, "moe_fused_gen: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

static int usage(const char *why) {
  fprintf(stderr,
          "moe_fused_gen: %s\nusage: moe_fused_gen DIR --experts E --tokens T --clusters C "
          "[--tile 64|auto] [--per-cluster 2] [--zipf 1.0] [--seed 1] [--hidden 2048] [--inter 768] "
          "[--shards 1] [--inputs [--packed]]\n",
          why);
  return 2;
}

static int parse(int argc, char **argv, gen_opts *o) {
  *o = (gen_opts){NULL, 0, 0, 0, 64, 2, 2048, 768, 1, 1.0, 1, 0, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--inputs")) {
      o->inputs = 1;
      continue;
    }
    if (!strcmp(a, "--packed")) {
      o->packed = 1;
      continue;
    }
    if (a[0] != '-') {
      if (o->dir)
        return usage("more than one DIR");
      o->dir = a;
      continue;
    }
    if (i + 1 >= argc)
      return usage("an option lacks its value");
    const char *v = argv[++i];
    if (!strcmp(a, "--tile")) /* the last --tile wins, a number or auto */
      o->tile_auto = !strcmp(v, "auto");
    if (o->tile_auto && !strcmp(a, "--tile")) {
      o->tile = 64; /* set per routing later */
      continue;
    }
    char *end;
    double d = strtod(v, &end);
    if (*end || d < 0)
      return usage("option values must be non-negative numbers");
    if (!strcmp(a, "--zipf"))
      o->zipf = d;
    else if (!strcmp(a, "--seed"))
      o->seed = (uint64_t)d;
    else {
      uint32_t *dst = !strcmp(a, "--experts")       ? &o->experts
                      : !strcmp(a, "--tokens")      ? &o->tokens
                      : !strcmp(a, "--clusters")    ? &o->clusters
                      : !strcmp(a, "--tile")        ? &o->tile
                      : !strcmp(a, "--per-cluster") ? &o->per_cluster
                      : !strcmp(a, "--hidden")      ? &o->hidden
                      : !strcmp(a, "--inter")       ? &o->inter
                      : !strcmp(a, "--shards")      ? &o->shards
                                                    : NULL;
      if (!dst)
        return usage("unknown option");
      if (d > 1e9 || d != floor(d))
        return usage("counts must be integers");
      *dst = (uint32_t)d;
    }
  }
  if (!o->dir || o->experts < 2 || !o->tokens || !o->clusters || !o->tile || !o->per_cluster ||
      !o->hidden || !o->inter || !o->shards)
    return usage("DIR, --experts (>= 2), --tokens and --clusters are required, counts > 0");
  if (o->inter % (32 * o->shards))
    return usage("--inter must split into --shards shards of whole 32-column chunks");
  if (o->packed && !o->inputs)
    return usage("--packed lays out the weights of --inputs");
  if (o->packed && (o->hidden % 32 || o->inter % 32))
    return usage("--packed needs --hidden and --inter multiples of 32 (k steps of 32)");
  return 0;
}

/* Experts of every token: two distinct Zipf draws. */
static void route(const gen_opts *o, int32_t *topk, float *topw) {
  uint64_t s = o->seed;
  uint32_t E = o->experts, *perm = xmalloc(sizeof *perm * E);
  double *cdf = xmalloc(sizeof *cdf * E), sum = 0;
  for (uint32_t e = 0; e < E; e++)
    perm[e] = e;
  for (uint32_t e = E - 1; e > 0; e--) { /* Fisher-Yates */
    uint32_t j = (uint32_t)(splitmix(&s) % (e + 1)), t = perm[e];
    perm[e] = perm[j];
    perm[j] = t;
  }
  for (uint32_t r = 0; r < E; r++)
    cdf[r] = (sum += pow(r + 1.0, -o->zipf));
  for (uint32_t t = 0; t < o->tokens; t++) {
    uint32_t pick[2];
    for (int k = 0; k < 2; k++)
      for (;;) {
        double u = uniform(&s) * sum;
        uint32_t r = 0;
        while (r + 1 < E && cdf[r] <= u)
          r++;
        pick[k] = perm[r];
        if (k == 0 || pick[1] != pick[0])
          break;
      }
    double l0 = 2 * uniform(&s), l1 = 2 * uniform(&s), m = l0 > l1 ? l0 : l1;
    double e0 = exp(l0 - m), e1 = exp(l1 - m);
    topk[2 * t] = (int32_t)pick[0];
    topk[2 * t + 1] = (int32_t)pick[1];
    topw[2 * t] = (float)(e0 / (e0 + e1));
    topw[2 * t + 1] = (float)(e1 / (e0 + e1));
  }
  free(perm);
  free(cdf);
}

typedef struct task {
  int32_t expert, start, count;
  double cost;
} task;

static int by_cost_desc(const void *a, const void *b) {
  const task *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? 1 : -1;
  return x->expert != y->expert ? x->expert - y->expert : x->start - y->start;
}

/* bf16 values uniform in [-scale, scale), and their doubles. */
static uint16_t *bf16_fill(uint64_t seed, size_t n, double scale, double **vals) {
  uint16_t *h = xmalloc(n * 2);
  double *v = xmalloc(n * sizeof *v);
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    host_value_store(DF_DTYPE_BFLOAT16, (uint8_t *)h, i, (2 * uniform(&s) - 1) * scale);
    v[i] = host_value_load(DF_DTYPE_BFLOAT16, (const uint8_t *)h, i);
  }
  *vals = v;
  return h;
}

/* --packed (the handlers' -DMOE_PACKED): each warp's 16-byte loads of one
   k step of an m-tile as one 1 KB block, lane L = 4g + t holding k
   32s + 8t .. +7 of its row; for expert e, m-tile m, k step s, half h
   the row is e * rows + m * m_stride + h * h_stride + g (rows of K
   elements). Wgu [E][I/8][H/32][2][32][8]: 8 columns per m-tile, gate
   (h = 0) and up (h = 1) rows I apart. Wd [E][H/16][I/32][2][32][8]:
   16 rows per m-tile, h = 1 the rows 8 below. */
static uint16_t *pack_tiles(const uint16_t *w, size_t E, size_t rows, size_t K, size_t m_stride,
                            size_t h_stride, size_t mtiles) {
  uint16_t *p = xmalloc(E * rows * K * 2);
  size_t n = 0;
  for (size_t e = 0; e < E; e++)
    for (size_t m = 0; m < mtiles; m++)
      for (size_t s = 0; s < K / 32; s++)
        for (size_t h = 0; h < 2; h++)
          for (size_t L = 0; L < 32; L++)
            for (size_t i = 0; i < 8; i++)
              p[n++] = w[(e * rows + m * m_stride + h * h_stride + L / 4) * K + 32 * s + 8 * (L % 4) + i];
  return p;
}

static int inputs_and_reference(const gen_opts *o, const int32_t *topk, const float *topw) {
  size_t T = o->tokens, E = o->experts, H = o->hidden, I = o->inter;
  double *x, *wgu, *wd;
  uint16_t *hx = bf16_fill(o->seed + 101, T * H, 1.0, &x);
  uint16_t *hgu = bf16_fill(o->seed + 102, E * 2 * I * H, 1.0 / sqrt((double)H), &wgu);
  uint16_t *hd = bf16_fill(o->seed + 103, E * H * I, 1.0 / sqrt((double)I), &wd);
  uint16_t *pgu = o->packed ? pack_tiles(hgu, E, 2 * I, H, 8, I, I / 8) : NULL;
  uint16_t *pd = o->packed ? pack_tiles(hd, E, H, I, 16, 8, H / 16) : NULL;
  int rc = write_file(o, "X.bin", hx, T * H * 2) ||
           write_file(o, "Wgu.bin", pgu ? pgu : hgu, E * 2 * I * H * 2) ||
           write_file(o, "Wd.bin", pd ? pd : hd, E * H * I * 2);
  free(pgu), free(pd);
  double *ref = xmalloc(sizeof *ref * T * H), *h = xmalloc(sizeof *h * I);
  for (size_t t = 0; t < T && !rc; t++)
    for (int k = 0; k < 2; k++) {
      size_t e = (size_t)topk[2 * t + k];
      const double *xt = x + t * H;
      for (size_t i = 0; i < I; i++) {
        const double *g = wgu + ((e * 2) * I + i) * H, *u = wgu + ((e * 2 + 1) * I + i) * H;
        double a = 0, b = 0;
        for (size_t c = 0; c < H; c++) {
          a += g[c] * xt[c];
          b += u[c] * xt[c];
        }
        h[i] = a / (1 + exp(-a)) * b;
      }
      for (size_t c = 0; c < H; c++) {
        const double *d = wd + (e * H + c) * I;
        double y = 0;
        for (size_t i = 0; i < I; i++)
          y += d[i] * h[i];
        ref[t * H + c] += topw[2 * t + k] * y;
      }
    }
  if (!rc) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ref.npy", o->dir);
    int64_t shape[2] = {(int64_t)T, (int64_t)H};
    df_status st = npy_write(path, DF_DTYPE_FLOAT64, 2, shape, ref, sizeof *ref * T * H);
    if (st.code != DF_OK) {
      fprintf(stderr, "moe_fused_gen: %s\n", st.message);
      rc = 1;
    }
  }
  free(hx), free(hgu), free(hd), free(x), free(wgu), free(wd), free(ref), free(h);
  return rc;
}

int main(int argc, char **argv) {
  gen_opts o;
  int rc = parse(argc, argv, &o);
  if (rc)
    return rc;
  uint32_t T = o.tokens, E = o.experts, C = o.clusters;
  int32_t *topk = xmalloc(sizeof *topk * 2 * T);
  float *topw = xmalloc(sizeof *topw * 2 * T);
  route(&o, topk, topw);

  /* Rows grouped by expert, tokens ascending inside a group. */
  uint32_t *count = xmalloc(sizeof *count * E), *first = xmalloc(sizeof *first * E);
  for (uint32_t i = 0; i < 2 * T; i++)
    count[topk[i]]++;
  for (uint32_t e = 0, acc = 0; e < E; acc += count[e], e++)
    first[e] = acc;
  int32_t *rows = xmalloc(sizeof *rows * 2 * T);
  float *rw = xmalloc(sizeof *rw * 2 * T);
  uint32_t *fill = xmalloc(sizeof *fill * E);
  for (uint32_t t = 0; t < T; t++)
    for (int k = 0; k < 2; k++) {
      uint32_t e = (uint32_t)topk[2 * t + k], r = first[e] + fill[e]++;
      rows[r] = (int32_t)t;
      rw[r] = topw[2 * t + k];
    }

  /* Tiles of balanced sizes. */
  if (o.tile_auto) {
    size_t n = sizeof AUTO_TILES / sizeof AUTO_TILES[0];
    o.tile = AUTO_TILES[n - 1];
    for (size_t i = 0; i < n; i++) {
      uint32_t tiles = 0;
      for (uint32_t e = 0; e < E; e++)
        tiles += (count[e] + AUTO_TILES[i] - 1) / AUTO_TILES[i];
      if (tiles <= C) {
        o.tile = AUTO_TILES[i];
        break;
      }
    }
  }
  uint32_t ntask = 0, max_count = 0;
  for (uint32_t e = 0; e < E; e++) {
    ntask += (count[e] + o.tile - 1) / o.tile;
    max_count = count[e] > max_count ? count[e] : max_count;
  }
  task *tasks = xmalloc(sizeof *tasks * (ntask ? ntask : 1));
  for (uint32_t e = 0, n = 0; e < E; e++) {
    uint32_t tiles = (count[e] + o.tile - 1) / o.tile;
    for (uint32_t k = 0, at = 0; k < tiles; k++) {
      uint32_t len = (count[e] - at) / (tiles - k);
      tasks[n++] = (task){(int32_t)e, (int32_t)(first[e] + at), (int32_t)len,
                          1.0 + (double)len / o.tile};
      at += len;
    }
  }
  if (ntask > C * o.per_cluster) {
    fprintf(stderr,
            "moe_fused_gen: %u tasks do not fit %u clusters x %u tasks; raise --per-cluster or "
            "--tile\n",
            ntask, C, o.per_cluster);
    return 1;
  }
  qsort(tasks, ntask, sizeof *tasks, by_cost_desc);
  /* Largest first onto the least-loaded cluster with room. */
  double *load = xmalloc(sizeof *load * C);
  uint32_t *held = xmalloc(sizeof *held * C), *slot = xmalloc(sizeof *slot * C * o.per_cluster);
  for (uint32_t i = 0; i < ntask; i++) {
    uint32_t best = C;
    for (uint32_t c = 0; c < C; c++)
      if (held[c] < o.per_cluster && (best == C || load[c] < load[best]))
        best = c;
    slot[best * o.per_cluster + held[best]++] = i;
    load[best] += tasks[i].cost;
  }
  uint32_t rounds = 0;
  for (uint32_t c = 0; c < C; c++)
    rounds = held[c] > rounds ? held[c] : rounds;
  /* Clusters are interchangeable: number them by task count, most first,
     so that the last round has no holes. */
  uint32_t *order = xmalloc(sizeof *order * C), n_ord = 0;
  for (uint32_t k = rounds; k > 0; k--)
    for (uint32_t c = 0; c < C; c++)
      if (held[c] == k)
        order[n_ord++] = c;
  for (uint32_t c = 0; c < C; c++)
    if (!held[c])
      order[n_ord++] = c;
  uint32_t positions = 0; /* last used position + 1 */
  for (uint32_t r = 0; r < C; r++)
    if (held[order[r]] && (held[order[r]] - 1) * C + r + 1 > positions)
      positions = (held[order[r]] - 1) * C + r + 1;
  int32_t *table = xmalloc(sizeof *table * 4 * (positions ? positions : 1));
  for (uint32_t p = 0; p < positions; p++) {
    uint32_t c = order[p % C], k = p / C;
    if (k < held[c]) {
      const task *tk = &tasks[slot[c * o.per_cluster + k]];
      table[4 * p] = tk->expert;
      table[4 * p + 1] = tk->start;
      table[4 * p + 2] = tk->count;
    }
  }
  double max_load = 0;
  for (uint32_t c = 0; c < C; c++)
    max_load = load[c] > max_load ? load[c] : max_load;

  rc = write_file(&o, "tasks.bin", table, sizeof *table * 4 * positions) ||
       write_file(&o, "tokens.bin", rows, sizeof *rows * 2 * T) ||
       write_file(&o, "weights.bin", rw, sizeof *rw * 2 * T) ||
       write_file(&o, "topk.bin", topk, sizeof *topk * 2 * T) ||
       write_file(&o, "topw.bin", topw, sizeof *topw * 2 * T);
  int32_t sync[8] = {(int32_t)T, (int32_t)positions, (int32_t)(positions < C ? positions : C)};
  rc = rc || write_file(&o, "sync.bin", sync, sizeof sync);
  char path[4096];
  snprintf(path, sizeof path, "%s/schedule.txt", o.dir);
  FILE *f = rc ? NULL : fopen(path, "w");
  if (!rc && !f) {
    fprintf(stderr, "moe_fused_gen: cannot write %s\n", path);
    rc = 1;
  }
  if (f) {
    fprintf(f, "task-extents=%u range-lengths=inter:", positions);
    for (uint32_t p = 0; p < positions; p++)
      fprintf(f, "%s%u", p ? "," : "", o.inter);
    /* down's range: whole 16-column m-tiles per shard, rounded up (the
       handlers skip the columns past hidden) */
    uint32_t hidden_range = (o.hidden + 16 * o.shards - 1) / (16 * o.shards) * 16 * o.shards;
    fprintf(f, ";hidden:");
    for (uint32_t p = 0; p < positions; p++)
      fprintf(f, "%s%u", p ? "," : "", hidden_range);
    rc = fclose(f) != 0;
  }
  char num[32];
  int len = snprintf(num, sizeof num, "%u", positions);
  rc = rc || write_file(&o, "ntasks", num, (size_t)len);
  printf("moe_fused_gen: tokens %u experts %u zipf %.2f seed %llu: rows per expert", T, E, o.zipf,
         (unsigned long long)o.seed);
  for (uint32_t e = 0; e < E; e++)
    printf(" %u", count[e]);
  /* Every task reads its expert's weights once (spread over its cluster),
     so a hot expert's tiles read them again: what the launch streams
     through the L2 (bench/moe run Y), against the floor's distinct bytes. */
  uint32_t distinct = 0;
  for (uint32_t e = 0; e < E; e++)
    distinct += count[e] > 0;
  const double set_mb = 3.0 * o.inter * o.hidden * 2 / 1e6; /* gate, up, down; bf16 */
  printf("\nmoe_fused_gen: max rows %u, %u tiles of <= %u%s, %u task positions on %u clusters "
         "(%u rounds), max cluster cost %.2f; weights read %.1f MB (%u sets), %.1f MB distinct "
         "(%u)\n",
         max_count, ntask, o.tile, o.tile_auto ? " (--tile auto)" : "", positions, C, rounds,
         max_load, ntask * set_mb, ntask, distinct * set_mb, distinct);
  if (!rc && o.inputs)
    rc = inputs_and_reference(&o, topk, topw);
  free(topk), free(topw), free(count), free(first), free(rows), free(rw), free(fill);
  free(tasks), free(load), free(held), free(slot), free(table), free(order);
  return rc;
}
