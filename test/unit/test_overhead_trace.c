/* bench/overhead's trace reader (bench/overhead/overhead_trace.c) on
   synthetic df_rt_trace_buf contents (df/rt_trace.h) with known phase
   lengths: the chain's two CTAs and the ITER's side are found, each
   phase's median is its length, the phases add up to the edge (and the
   dispatch loop to one instruction), clock64 turns into the SM clock,
   and traces of the wrong shape are refused with a message. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../bench/overhead/overhead_trace.h"
#include "df/rt_trace.h"

static uint64_t *buf;

/* Stamp `point` of (cta, pc) at `ns`; clock64 runs at 2 GHz from a
   per-CTA origin, so cross-CTA cycle differences would be nonsense. */
static void put(uint32_t cta, uint32_t pc, uint32_t point, uint64_t ns) {
  buf[DF_RT_TRACE_INDEX(cta, pc, point, 0)] = ns;
  buf[DF_RT_TRACE_INDEX(cta, pc, point, 1)] = 2 * ns + 1000000ull * cta;
}

static int setup(void **state) {
  (void)state;
  buf = calloc(DF_RT_TRACE_WORDS, sizeof *buf);
  return buf ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  free(buf);
  return 0;
}

/* Runs `fn` into a string (malloc'ed) and returns its result in *rc. */
typedef int (*report_fn)(FILE *out);
static char *capture(report_fn fn, int *rc) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  *rc = fn(f);
  fclose(f);
  return text;
}

static void contains(const char *text, const char *fragment) {
  if (!strstr(text, fragment)) {
    fprintf(stderr, "missing '%s' in:\n%s\n", fragment, text);
    fail();
  }
}

/* A cluster chain of `length` edges between CTAs a (ITER) and b, on 8
   CTAs (the rest run only their EXIT). Each edge: 700 ns from the send's
   END to the receiver's CL_WAIT, then 100, 50, 200, 80, 120, 180 ns. */
static uint32_t chain_a = 4, chain_b = 5, chain_len = 32;
static bool chain_skip_recv; /* leave out one receive stamp */

static void make_chain(void) {
  memset(buf, 0, DF_RT_TRACE_WORDS * sizeof *buf);
  uint64_t end[2] = {0, 0}, send_end = 0;
  uint32_t pc[2] = {0, 0};
  for (uint32_t k = 0; k <= chain_len; k++) {
    uint32_t side = k % 2, cta = side ? chain_b : chain_a;
    uint64_t top = pc[side] ? end[side] + 20 : 1000;
    put(cta, pc[side], DF_RT_TRACE_TOP, top);
    uint64_t t = top + 30;
    if (k) {
      t = send_end + 700;
      if (!(chain_skip_recv && k == 9))
        put(cta, pc[side], DF_RT_TRACE_CL_WAIT, t);
      put(cta, pc[side], DF_RT_TRACE_CL_SYNC, t += 100);
    }
    put(cta, pc[side], DF_RT_TRACE_H_BEGIN, t += 50);
    put(cta, pc[side], DF_RT_TRACE_H_END, t += 200);
    put(cta, pc[side], DF_RT_TRACE_POST_SYNC, t += 80);
    put(cta, pc[side], DF_RT_TRACE_SEND_MID, t += 120);
    put(cta, pc[side], DF_RT_TRACE_END, t += 180);
    end[side] = send_end = t;
    pc[side]++;
  }
  /* FINALIZE on the last instruction's CTA (no receive), then EXITs. */
  uint32_t side = chain_len % 2, cta = side ? chain_b : chain_a;
  put(cta, pc[side], DF_RT_TRACE_TOP, end[side] + 20);
  put(cta, pc[side], DF_RT_TRACE_H_BEGIN, end[side] + 40);
  put(cta, pc[side]++, DF_RT_TRACE_END, end[side] + 60);
  for (uint32_t c = 0; c < 8; c++) {
    uint32_t p = c == chain_a ? pc[0] : c == chain_b ? pc[1] : 0;
    put(c, p, DF_RT_TRACE_TOP, 500000);
  }
}

static int chain_report(FILE *out) {
  ov_trace_ref ref = {2.5, 60.0};
  return ov_trace_chain(out, buf, 8, "cluster", chain_len, &ref);
}

static void chain_phases(void **state) {
  (void)state;
  chain_a = 4;
  chain_b = 5;
  chain_skip_recv = false;
  make_chain();
  int rc;
  char *t = capture(chain_report, &rc);
  assert_int_equal(rc, 0);
  contains(t, "Chain cluster, L = 32: CTAs 4 (ITER) and 5, edges 5..30 (26 edges)");
  contains(t, "| send issued -> mbarrier wait satisfied (two SMs) | send.END -> recv.CL_WAIT | "
              "26 | 700 | 700.0 | - (two SMs) | - |");
  contains(t, "| receive bar.sync | recv.CL_WAIT -> recv.CL_SYNC | 26 | 100 "
              "| 100.0 | 200 | 100.0 |");
  contains(t, "| handler (one-input REDUCE, thread 0 adds) | recv.H_BEGIN -> recv.H_END | 26 | "
              "200 | 200.0 | 400 | 200.0 |");
  contains(t, "| cluster send: records, mapa, bulk copy issue | recv.POST_SYNC -> "
              "recv.SEND_MID | 26 | 120 | 120.0 | 240 | 120.0 |");
  contains(t, "| cluster send: remote arrive.expect_tx, commit, source ranges | recv.SEND_MID -> "
              "recv.END | 26 | 180 | 180.0 | 360 | 180.0 |");
  contains(t, "| **one edge (sender END -> receiver END)** | send.END -> recv.END | 26 | 1430 |");
  contains(t, "Sum of the phase medians: 1430 ns; median of the whole (last row): 1430 ns (the "
              "phases account for 100 %).");
  contains(t, "SM clock from %clock64 / %globaltimer");
  contains(t, "2.000 GHz");
  contains(t, "gcd of steps 10 ns");
  /* The receiver waits at its top: it got there 1430 - 20 ns before the send. */
  contains(t, "| recv.TOP -> send.END | 26 | 1410 |");
  contains(t, "untraced fit 2.500 us per edge");
  free(t);
  /* The ITER on the higher CTA: found all the same. */
  chain_a = 6;
  chain_b = 1;
  make_chain();
  t = capture(chain_report, &rc);
  assert_int_equal(rc, 0);
  contains(t, "CTAs 6 (ITER) and 1");
  contains(t, "(the phases account for 100 %)");
  free(t);
}

static void chain_shapes_refused(void **state) {
  (void)state;
  chain_a = 4;
  chain_b = 5;
  chain_skip_recv = true;
  make_chain();
  int rc;
  char *t = capture(chain_report, &rc);
  assert_int_equal(rc, -1);
  contains(t, "trace: chain instruction 9 (CTA 5, pc 4) has no CL_WAIT stamp; trace not used");
  free(t);
  chain_skip_recv = false;
  make_chain();
  put(7, 0, DF_RT_TRACE_H_BEGIN, 600000); /* a third CTA with a handler */
  t = capture(chain_report, &rc);
  assert_int_equal(rc, -1);
  contains(t, "trace: more than two CTAs ran handlers (CTA 7 too); trace not used");
  free(t);
  make_chain();
  buf[DF_RT_TRACE_INDEX(chain_b, 0, DF_RT_TRACE_CL_WAIT, 0)] = 0; /* both start without */
  t = capture(chain_report, &rc);
  assert_int_equal(rc, -1);
  contains(t, "cannot tell the ITER's CTA (4, 5: first handlers both without a receive)");
  free(t);
  memset(buf, 0, DF_RT_TRACE_WORDS * sizeof *buf);
  t = capture(chain_report, &rc);
  assert_int_equal(rc, -1);
  contains(t, "trace: 0 CTAs ran handlers, expected 2; trace not used");
  free(t);
}

/* Dispatch: 4 CTAs x 32 empty ITERs + EXIT; per instruction 40 + 10 +
   60 + 20 ns, then 30 ns back to the next top: 160 ns. */
static uint32_t disp_handlers = 32;

static void make_dispatch(void) {
  memset(buf, 0, DF_RT_TRACE_WORDS * sizeof *buf);
  for (uint32_t c = 0; c < 4; c++) {
    uint64_t t = 1000 + 7 * c;
    uint32_t n = c == 2 ? disp_handlers : 32;
    for (uint32_t pc = 0; pc < n; pc++) {
      put(c, pc, DF_RT_TRACE_TOP, t);
      put(c, pc, DF_RT_TRACE_H_BEGIN, t += 40);
      put(c, pc, DF_RT_TRACE_H_END, t += 10);
      put(c, pc, DF_RT_TRACE_POST_SYNC, t += 60);
      put(c, pc, DF_RT_TRACE_END, t += 20);
      t += 30;
    }
    put(c, n, DF_RT_TRACE_TOP, t);
  }
}

static int dispatch_report(FILE *out) {
  ov_trace_ref ref = {187.8, 10.5};
  return ov_trace_dispatch(out, buf, 4, 32, &ref);
}

static void dispatch_phases(void **state) {
  (void)state;
  disp_handlers = 32;
  make_dispatch();
  int rc;
  char *t = capture(dispatch_report, &rc);
  assert_int_equal(rc, 0);
  contains(t, "Dispatch, 32 empty ITERs per SM: 104 instructions (4 CTAs, ITERs 4..29 of each)");
  contains(t, "| decode, source guard (top -> handler) | TOP -> H_BEGIN | 104 | 40 | 40.0 | 80 | "
              "40.0 |");
  contains(t, "| post-handler bar.sync | H_END -> POST_SYNC | 104 | 60 | 60.0 | 120 | 60.0 |");
  contains(t, "| loop back (next record) | END -> next.TOP | 104 | 30 | 30.0 | 60 | 30.0 |");
  contains(t, "| **one instruction (top -> next top)** | TOP -> next.TOP | 104 | 160 | 160.0 | "
              "320 | 160.0 |");
  contains(t, "(the phases account for 100 %)");
  contains(t, "smallest non-zero step 10 ns");
  contains(t, "Untraced fit: 187.8 ns per instruction; traced kernel: 10.50 us per launch, 328.1 "
              "ns per ITER per SM");
  free(t);
  disp_handlers = 31;
  make_dispatch();
  t = capture(dispatch_report, &rc);
  assert_int_equal(rc, -1);
  contains(t, "trace: CTA 2 ran 31 handlers, expected 32; trace not used");
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chain_phases),
      cmocka_unit_test(chain_shapes_refused),
      cmocka_unit_test(dispatch_phases),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
