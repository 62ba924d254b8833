/* bench/overhead's manifest reader (bench/overhead/overhead_manifest.c):
   every line kind of make_carry.sh is read into its case list, an
   empty-handler chain keeps the plan it runs on, blank lines are skipped,
   and unknown, short, over-long or non-numeric lines and too many cases
   are refused with a message naming the file and line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../bench/overhead/overhead_manifest.h"

/* Reads `text` as manifest "m.txt"; the error message lands in `msg`. */
static int read_text(const char *text, ov_manifest *m, char *msg, size_t cap) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  assert_non_null(f);
  msg[0] = 0;
  FILE *err = fmemopen(msg, cap, "w");
  assert_non_null(err);
  int rc = ov_manifest_read(f, "m.txt", m, err);
  fclose(err);
  fclose(f);
  return rc;
}

static void every_kind(void **state) {
  (void)state;
  ov_manifest *m = calloc(1, sizeof *m);
  char msg[256];
  assert_int_equal(read_text("dispatch disp_1 1\n"
                             "dispatch disp_2 2\n"
                             "\n"
                             "launch launch\n"
                             "chain chain_cluster_2 cluster 2\n"
                             "echain echain_cluster_2 chain_cluster_2 cluster 2\n"
                             "trace trace_disp_32 dispatch 32\n"
                             "replan gqa_replan 2048 4096\n",
                             m, msg, sizeof msg),
                   0);
  assert_string_equal(msg, "");
  assert_int_equal(m->nd, 2);
  assert_string_equal(m->disp[1].name, "disp_2");
  assert_int_equal(m->disp[1].per_sm, 2);
  assert_int_equal(m->nc, 2);
  assert_string_equal(m->chains[0].name, "chain_cluster_2");
  assert_string_equal(m->chains[0].plan, ""); /* counting: its own plan */
  assert_string_equal(m->chains[1].name, "echain_cluster_2");
  assert_string_equal(m->chains[1].plan, "chain_cluster_2");
  assert_string_equal(m->chains[1].kind, "cluster");
  assert_int_equal(m->chains[1].length, 2);
  assert_int_equal(m->nt, 1);
  assert_string_equal(m->traces[0].kind, "dispatch");
  assert_int_equal(m->traces[0].length, 32);
  assert_string_equal(m->launch, "launch");
  assert_string_equal(m->replan, "gqa_replan");
  assert_int_equal(m->replan_block, 2048);
  assert_int_equal(m->replan_lmax, 4096);
  free(m);
}

static void bad_lines(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"dispatch disp_1 1\nfrobnicate x\n", "m.txt:2: unknown or malformed line: frobnicate x"},
      {"chain c cluster\n", "m.txt:1: unknown or malformed line: chain c cluster"},
      {"echain e c cluster 2 7\n", "m.txt:1: unknown or malformed line: echain e c cluster 2 7"},
      {"dispatch d many\n", "m.txt:1: unknown or malformed line: dispatch d many"},
      {"replan r 2048\n", "m.txt:1: unknown or malformed line: replan r 2048"},
      {"launch\n", "m.txt:1: unknown or malformed line: launch"},
  };
  ov_manifest *m = calloc(1, sizeof *m);
  char msg[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(read_text(cases[i].text, m, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, cases[i].want));
  }
  free(m);
}

static void too_many_cases(void **state) {
  (void)state;
  size_t cap = (OV_MAX_CASES + 1) * 32 + 1;
  char *text = calloc(1, cap);
  for (uint32_t i = 0; i <= OV_MAX_CASES; i++)
    snprintf(text + strlen(text), cap - strlen(text), "chain c%u hbm %u\n", i, i + 2);
  ov_manifest *m = calloc(1, sizeof *m);
  char msg[256];
  assert_int_equal(read_text(text, m, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "m.txt:65: more than 64 chain cases"));
  free(m);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_kind),
      cmocka_unit_test(bad_lines),
      cmocka_unit_test(too_many_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
