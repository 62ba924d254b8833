/* The per-SM read-rate probe's host arithmetic (sm_rate_stats.h). */
#include "sm_rate_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int smr_layout_table(uint32_t *table, uint32_t table_len, uint32_t ctas, int layout) {
  if (ctas == 0 || ctas > table_len / 2 || layout < 0)
    return -1;
  memset(table, 0, (size_t)2 * ctas * sizeof *table);
  if (layout == SMR_HEADS16) {
    for (uint32_t b = 0; b < ctas && b < 16u * SMR_HEADS; b++) {
      table[2 * b] = b / 16u * SMR_ROWS + b % 16u * (SMR_ROWS / 16u);
      table[2 * b + 1] = SMR_ROWS / 16u;
    }
    return 0;
  }
  const uint32_t share = layout == SMR_EVEN ? 1u : (uint32_t)layout;
  const uint32_t ranges = (ctas + share - 1) / share;
  for (uint32_t r = 0, begin = 0; r < ranges; r++) {
    const uint32_t count = SMR_UNITS / ranges + (r < SMR_UNITS % ranges);
    for (uint32_t b = r * share; b < (r + 1) * share && b < ctas; b++) {
      table[2 * b] = begin;
      table[2 * b + 1] = count;
    }
    begin += count;
  }
  return 0;
}

int smr_split_weighted(uint32_t *table, uint32_t table_len, const uint32_t *idx,
                       const double *w, uint32_t n) {
  if (n == 0)
    return -1;
  double sum = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    if (idx[i] >= table_len / 2 || !(w[idx[i]] >= 0.0))
      return -1;
    sum += w[idx[i]];
  }
  if (!(sum > 0.0))
    return -1;
  memset(table, 0, (size_t)table_len * sizeof *table);
  uint32_t given = 0;
  for (uint32_t i = 0; i < n; i++) {
    table[2 * idx[i] + 1] = (uint32_t)floor(SMR_UNITS * (w[idx[i]] / sum));
    given += table[2 * idx[i] + 1];
  }
  for (uint32_t i = 0; given < SMR_UNITS; i = (i + 1) % n, given++)
    table[2 * idx[i] + 1]++;
  for (uint32_t i = 0, begin = 0; i < n; i++) {
    table[2 * idx[i]] = begin;
    begin += table[2 * idx[i] + 1];
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double smr_median(double *v, uint32_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double smr_pearson(const double *a, const double *b, uint32_t n) {
  double ma = 0.0, mb = 0.0, sab = 0.0, saa = 0.0, sbb = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    ma += a[i];
    mb += b[i];
  }
  ma /= n;
  mb /= n;
  for (uint32_t i = 0; i < n; i++) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0.0 && sbb > 0.0 ? sab / sqrt(saa * sbb) : 0.0;
}
