/* The per-SM read-rate probe's host arithmetic (bench/smrate/README.md):
   the work tables its kernels read and the statistics of its report.
   Pure host code (no driver), unit-tested in test/unit/test_sm_rate_stats.c. */
#ifndef SMR_STATS_H
#define SMR_STATS_H

#include <stdint.h>

/* K and V of the probe: f16[SMR_ROWS][SMR_HEADS][128]; a unit is one
   (head, row) pair, 256 bytes of K and 256 of V, unit u = head u / ROWS,
   row u % ROWS. */
#define SMR_ROWS 131072u
#define SMR_HEADS 8u
#define SMR_UNITS (SMR_ROWS * SMR_HEADS)

/* How a launch's units are laid out over its CTAs (table[2 b] = first
   unit of CTA b, table[2 b + 1] = its count). */
typedef enum smr_layout {
  SMR_EVEN = 0,  /* every unit once, CTAs' counts within one of each other */
  SMR_HEADS16 = 1, /* 16 CTAs per head of ROWS / 16 keys each (u1x128k's
                      round-robin plan), CTAs past 16 x HEADS idle */
  /* S >= 2: the even split of the units into ceil(CTAs / S) ranges, range r
     read by CTAs r S .. r S + S - 1 (each byte read by S SMs) */
} smr_layout;

/* Fills table[0 .. 2 ctas) for LAYOUT (an smr_layout, or S >= 2). Returns
   0, or -1 when ctas is 0 or past table_len / 2, or layout is negative. */
int smr_layout_table(uint32_t *table, uint32_t table_len, uint32_t ctas, int layout);

/* Splits every unit over the indices IDX[0 .. n) in index order with
   counts proportional to W[IDX[i]] (contiguous ranges; the rounding's
   remainder one unit each to the first indices), writing
   table[2 IDX[i]] and table[2 IDX[i] + 1] and zeroing the rest of
   table[0 .. table_len). Returns 0, or -1 when n is 0, an index is past
   table_len / 2, or a weight is negative or all are 0. */
int smr_split_weighted(uint32_t *table, uint32_t table_len, const uint32_t *idx,
                       const double *w, uint32_t n);

/* Median of V[0 .. n) (sorts V; the mean of the middle two for even n). n > 0. */
double smr_median(double *v, uint32_t n);

/* Pearson correlation of A and B over n points; 0 when either is constant. */
double smr_pearson(const double *a, const double *b, uint32_t n);

#endif
