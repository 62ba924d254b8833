/* Per-phase tables of bench/overhead's traced cases (overhead_trace.h).
   A phase is the time between two stamps: of one instruction, of one
   instruction and the next on the same CTA (dispatch), or of a chain's
   sending and receiving instructions (two CTAs: %globaltimer only, one
   clock for the whole GPU; %clock64 is per SM). Medians over the steady
   state, in ns from %globaltimer and in cycles from %clock64 (finer where
   %globaltimer moves in coarse steps; the granularity is printed). */
#include "overhead_trace.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_util.h"
#include "df/rt_trace.h"

static const char *const point_name[DF_RT_TRACE_POINTS] = {
    "TOP", "CL_WAIT", "CL_SYNC", "HBM_FLAG", "HBM_DONE",
    "H_BEGIN", "H_END", "POST_SYNC", "SEND_MID", "END"};

/* One instruction of one CTA. */
typedef struct ref {
  uint32_t cta, pc;
} ref;

static uint64_t stamp(const uint64_t *buf, ref r, uint32_t point, uint32_t which) {
  return buf[DF_RT_TRACE_INDEX(r.cta, r.pc, point, which)];
}

/* A phase: from stamp (role a, point pa) to (role b, point pb). Roles
   index the pair of instructions a sample is taken on. */
typedef struct phase {
  const char *what;
  uint32_t ra, pa, rb, pb;
} phase;

typedef struct series {
  double *ns, *cyc;
  uint32_t n, ncyc;
} series;

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* %globaltimer's observed step: the smallest non-zero and the gcd of all
   deltas between successive stamps of one instruction; and the SM clock
   from the longest same-CTA span (clock64 / globaltimer). */
static double clock_and_granularity(FILE *out, const uint64_t *buf, uint32_t ctas) {
  uint64_t min_d = 0, g = 0, zero = 0, total = 0;
  double best_ns = 0, ghz = NAN;
  for (uint32_t c = 0; c < ctas; c++) {
    uint64_t first_g = 0, first_c = 0, last_g = 0, last_c = 0;
    for (uint32_t pc = 0; pc < DF_RT_TRACE_INSTRS; pc++) {
      ref r = {c, pc};
      uint64_t prev = 0;
      for (uint32_t p = 0; p < DF_RT_TRACE_POINTS; p++) {
        uint64_t t = stamp(buf, r, p, 0);
        if (!t)
          continue;
        if (!first_g) {
          first_g = t;
          first_c = stamp(buf, r, p, 1);
        }
        last_g = t;
        last_c = stamp(buf, r, p, 1);
        if (prev && t >= prev) {
          uint64_t d = t - prev;
          total++;
          if (!d) {
            zero++;
          } else {
            min_d = !min_d || d < min_d ? d : min_d;
            g = gcd64(g, d);
          }
        }
        prev = t;
      }
    }
    if (last_g > first_g && last_c > first_c && (double)(last_g - first_g) > best_ns) {
      best_ns = (double)(last_g - first_g);
      ghz = (double)(last_c - first_c) / best_ns;
    }
  }
  fprintf(out, "\n%%globaltimer granularity: smallest non-zero step %llu ns, gcd of steps "
               "%llu ns, %llu of %llu successive-stamp deltas are 0; SM clock from "
               "%%clock64 / %%globaltimer over %.1f us of one CTA: %.3f GHz\n",
          (unsigned long long)min_d, (unsigned long long)g, (unsigned long long)zero,
          (unsigned long long)total, best_ns / 1000.0, ghz);
  return ghz;
}

/* Samples of `ph` over `pairs` (n of them, `roles` refs each). */
static series collect(const uint64_t *buf, const phase *ph, const ref *pairs, uint32_t roles,
                      uint32_t n) {
  series s = {calloc(n ? n : 1, sizeof(double)), calloc(n ? n : 1, sizeof(double)), 0, 0};
  if (!s.ns || !s.cyc) {
    fprintf(stderr, "overhead_bench: out of memory (trace samples)\n");
    exit(1);
  }
  for (uint32_t i = 0; i < n; i++) {
    ref a = pairs[i * roles + ph->ra], b = pairs[i * roles + ph->rb];
    uint64_t ga = stamp(buf, a, ph->pa, 0), gb = stamp(buf, b, ph->pb, 0);
    if (!ga || !gb)
      continue;
    s.ns[s.n++] = (double)(int64_t)(gb - ga);
    if (a.cta == b.cta)
      s.cyc[s.ncyc++] = (double)(int64_t)(stamp(buf, b, ph->pb, 1) - stamp(buf, a, ph->pa, 1));
  }
  return s;
}

/* The table: one row per phase (the last is the total), then, with
   `check`, whether the phases add up to the total. Returns the total's
   median ns. */
static double phase_table(FILE *out, const uint64_t *buf, const phase *ph, uint32_t nph,
                          const char *const *role_name, const ref *pairs, uint32_t roles,
                          uint32_t n, double ghz, bool check) {
  fprintf(out, "\n| phase | from -> to | samples | median ns (globaltimer) | mean ns | "
               "median cycles (clock64) | cycles / SM clock, ns |\n"
               "|---|---|---|---|---|---|---|\n");
  double sum = 0, total = NAN;
  for (uint32_t i = 0; i < nph; i++) {
    series s = collect(buf, &ph[i], pairs, roles, n);
    double med = s.n ? bench_median(s.ns, s.n) : NAN;
    double mn = 0;
    for (uint32_t j = 0; j < s.n; j++)
      mn += s.ns[j];
    mn = s.n ? mn / s.n : NAN;
    double cyc = s.ncyc ? bench_median(s.cyc, s.ncyc) : NAN;
    bool last = i + 1 == nph;
    char from[48], to[48];
    snprintf(from, sizeof from, "%s%s", role_name[ph[i].ra], point_name[ph[i].pa]);
    snprintf(to, sizeof to, "%s%s", role_name[ph[i].rb], point_name[ph[i].pb]);
    if (s.ncyc)
      fprintf(out, "| %s%s%s | %s -> %s | %u | %.0f | %.1f | %.0f | %.1f |\n", last ? "**" : "",
              ph[i].what, last ? "**" : "", from, to, s.n, med, mn, cyc, cyc / ghz);
    else
      fprintf(out, "| %s%s%s | %s -> %s | %u | %.0f | %.1f | - (two SMs) | - |\n",
              last ? "**" : "", ph[i].what, last ? "**" : "", from, to, s.n, med, mn);
    if (last)
      total = med;
    else if (s.n)
      sum += med;
    free(s.ns);
    free(s.cyc);
  }
  if (check)
    fprintf(out, "\nSum of the phase medians: %.0f ns; median of the whole (last row): %.0f ns "
                 "(the phases account for %.0f %%).\n",
            sum, total, 100.0 * sum / total);
  return total;
}

/* Instructions of CTA c that ran a handler (H_BEGIN stamped), in order. */
static uint32_t handler_pcs(const uint64_t *buf, uint32_t c, uint32_t *pcs) {
  uint32_t n = 0;
  for (uint32_t pc = 0; pc < DF_RT_TRACE_INSTRS; pc++)
    if (stamp(buf, (ref){c, pc}, DF_RT_TRACE_H_BEGIN, 0))
      pcs[n++] = pc;
  return n;
}

int ov_trace_dispatch(FILE *out, const uint64_t *buf, uint32_t ctas, uint32_t per_sm,
                      const ov_trace_ref *ref_in) {
  if (ctas > DF_RT_TRACE_CTAS)
    ctas = DF_RT_TRACE_CTAS;
  double ghz = clock_and_granularity(out, buf, ctas);
  /* (this instruction, the next) for every CTA's steady-state ITERs */
  ref *pairs = calloc((size_t)ctas * DF_RT_TRACE_INSTRS * 2, sizeof *pairs);
  if (!pairs) {
    fprintf(stderr, "overhead_bench: out of memory (trace pairs)\n");
    exit(1);
  }
  uint32_t n = 0, pcs[DF_RT_TRACE_INSTRS];
  for (uint32_t c = 0; c < ctas; c++) {
    uint32_t h = handler_pcs(buf, c, pcs);
    if (h != per_sm && !(per_sm > h && h == DF_RT_TRACE_INSTRS)) {
      fprintf(out, "\ntrace: CTA %u ran %u handlers, expected %u; trace not used\n", c, h,
              per_sm);
      free(pairs);
      return -1;
    }
    for (uint32_t i = OV_TRACE_SKIP; i + OV_TRACE_TAIL < h; i++) {
      pairs[n * 2] = (ref){c, pcs[i]};
      pairs[n * 2 + 1] = (ref){c, pcs[i] + 1};
      n++;
    }
  }
  static const phase ph[] = {
      {"decode, source guard (top -> handler)", 0, DF_RT_TRACE_TOP, 0, DF_RT_TRACE_H_BEGIN},
      {"handler (df_dispatch, empty)", 0, DF_RT_TRACE_H_BEGIN, 0, DF_RT_TRACE_H_END},
      {"post-handler bar.sync", 0, DF_RT_TRACE_H_END, 0, DF_RT_TRACE_POST_SYNC},
      {"after the barrier (no sends)", 0, DF_RT_TRACE_POST_SYNC, 0, DF_RT_TRACE_END},
      {"loop back (next record)", 0, DF_RT_TRACE_END, 1, DF_RT_TRACE_TOP},
      {"one instruction (top -> next top)", 0, DF_RT_TRACE_TOP, 1, DF_RT_TRACE_TOP},
  };
  static const char *const role[] = {"", "next."};
  fprintf(out, "\nDispatch, %u empty ITERs per SM: %u instructions (%u CTAs, ITERs %u..%u of "
               "each)\n",
          per_sm, n, ctas, OV_TRACE_SKIP, per_sm - OV_TRACE_TAIL - 1);
  double total =
      phase_table(out, buf, ph, sizeof ph / sizeof ph[0], role, pairs, 2, n, ghz, true);
  fprintf(out, "Untraced fit: %.1f ns per instruction; traced kernel: %.2f us per launch, %.1f "
               "ns per ITER per SM (whole run / N); traced median instruction %.0f ns.\n",
          ref_in->untraced, ref_in->traced_us, ref_in->traced_us * 1000.0 / per_sm, total);
  free(pairs);
  return 0;
}

int ov_trace_chain(FILE *out, const uint64_t *buf, uint32_t ctas, const char *kind,
                   uint32_t length, const ov_trace_ref *ref_in) {
  if (ctas > DF_RT_TRACE_CTAS)
    ctas = DF_RT_TRACE_CTAS;
  const bool cluster = !strcmp(kind, "cluster");
  const uint32_t recv = cluster ? DF_RT_TRACE_CL_WAIT : DF_RT_TRACE_HBM_FLAG;
  const uint32_t recvd = cluster ? DF_RT_TRACE_CL_SYNC : DF_RT_TRACE_HBM_DONE;
  double ghz = clock_and_granularity(out, buf, ctas);
  /* The two CTAs that ran handlers; A ran the ITER (no receive). */
  uint32_t who[2], nwho = 0, pcs[2][DF_RT_TRACE_INSTRS], npcs[2] = {0, 0};
  for (uint32_t c = 0; c < ctas; c++) {
    uint32_t tmp[DF_RT_TRACE_INSTRS];
    uint32_t h = handler_pcs(buf, c, tmp);
    if (!h)
      continue;
    if (nwho == 2) {
      fprintf(out, "\ntrace: more than two CTAs ran handlers (CTA %u too); trace not used\n", c);
      return -1;
    }
    who[nwho] = c;
    npcs[nwho] = h;
    memcpy(pcs[nwho++], tmp, sizeof tmp);
  }
  if (nwho != 2) {
    fprintf(out, "\ntrace: %u CTAs ran handlers, expected 2; trace not used\n", nwho);
    return -1;
  }
  const bool a0 = !stamp(buf, (ref){who[0], pcs[0][0]}, recv, 0);
  const bool a1 = !stamp(buf, (ref){who[1], pcs[1][0]}, recv, 0);
  if (a0 == a1) {
    fprintf(out, "\ntrace: cannot tell the ITER's CTA (%u, %u: first handlers %s a receive); "
                 "trace not used\n",
            who[0], who[1], a0 ? "both without" : "both with");
    return -1;
  }
  const uint32_t A = a0 ? 0 : 1, B = 1 - A;
  /* Instruction k of the chain: k even on A, odd on B. */
  uint32_t traced = length;
  ref *seq = calloc(length + 1, sizeof *seq);
  ref *pairs = calloc(2 * (size_t)(length + 1), sizeof *pairs);
  if (!seq || !pairs) {
    fprintf(stderr, "overhead_bench: out of memory (trace chain)\n");
    exit(1);
  }
  for (uint32_t k = 0; k <= length; k++) {
    uint32_t side = k % 2 ? B : A, i = k / 2;
    if (i >= npcs[side]) {
      traced = k - 1;
      break;
    }
    seq[k] = (ref){who[side], pcs[side][i]};
    if (k && !stamp(buf, seq[k], recv, 0)) {
      fprintf(out, "\ntrace: chain instruction %u (CTA %u, pc %u) has no %s stamp; trace not "
                   "used\n",
              k, seq[k].cta, seq[k].pc, point_name[recv]);
      free(seq);
      free(pairs);
      return -1;
    }
  }
  uint32_t n = 0;
  for (uint32_t k = OV_TRACE_SKIP + 1; k + OV_TRACE_TAIL <= traced; k++) {
    pairs[n * 2] = seq[k - 1]; /* sender */
    pairs[n * 2 + 1] = seq[k]; /* receiver */
    n++;
  }
  static const char *const role[] = {"send.", "recv."};
  fprintf(out, "\nChain %s, L = %u: CTAs %u (ITER) and %u, edges %u..%u (%u edges)\n", kind,
          length, who[A], who[B], OV_TRACE_SKIP + 1, traced - OV_TRACE_TAIL, n);
  phase ph[9];
  uint32_t np = 0;
  ph[np++] = (phase){"receiver ready before the send (slack, not in the sum)", 1,
                     DF_RT_TRACE_TOP, 0, DF_RT_TRACE_END};
  ph[np++] = (phase){cluster ? "send issued -> mbarrier wait satisfied (two SMs)"
                             : "release store -> flag poll satisfied (two SMs)",
                     0, DF_RT_TRACE_END, 1, recv};
  ph[np++] = (phase){cluster ? "receive bar.sync"
                             : "receive bar.sync + staging copy + arrive + bar.sync",
                     1, recv, 1, recvd};
  ph[np++] = (phase){"-> handler (rest of the receive phase, mark)", 1, recvd, 1,
                     DF_RT_TRACE_H_BEGIN};
  ph[np++] = (phase){"handler (one-input REDUCE, thread 0 adds)", 1, DF_RT_TRACE_H_BEGIN, 1,
                     DF_RT_TRACE_H_END};
  ph[np++] = (phase){"post-handler fence + bar.sync", 1, DF_RT_TRACE_H_END, 1,
                     DF_RT_TRACE_POST_SYNC};
  if (cluster) {
    ph[np++] = (phase){"cluster send: records, mapa, bulk copy issue", 1, DF_RT_TRACE_POST_SYNC,
                       1, DF_RT_TRACE_SEND_MID};
    ph[np++] = (phase){"cluster send: remote arrive.expect_tx, commit, source ranges", 1,
                       DF_RT_TRACE_SEND_MID, 1, DF_RT_TRACE_END};
  } else {
    ph[np++] = (phase){"HBM send: staging copy + bar.sync", 1, DF_RT_TRACE_POST_SYNC, 1,
                       DF_RT_TRACE_SEND_MID};
    ph[np++] = (phase){"HBM send: release store(s)", 1, DF_RT_TRACE_SEND_MID, 1,
                       DF_RT_TRACE_END};
  }
  ph[np++] = (phase){"one edge (sender END -> receiver END)", 0, DF_RT_TRACE_END, 1,
                     DF_RT_TRACE_END};
  /* The slack is not part of the edge: a table of its own. Positive: the
     receiver was at its loop top before the send, so the wait measures
     the transfer and wake-up, not a late receiver. */
  phase_table(out, buf, ph, 1, role, pairs, 2, n, ghz, false);
  double total = phase_table(out, buf, ph + 1, np - 1, role, pairs, 2, n, ghz, true);
  fprintf(out, "Edge time: traced median %.3f us; traced kernel %.2f us per launch (%.3f us "
               "per edge, whole run / L); untraced fit %.3f us per edge.\n",
          total / 1000.0, ref_in->traced_us, ref_in->traced_us / length, ref_in->untraced);
  free(seq);
  free(pairs);
  return 0;
}
