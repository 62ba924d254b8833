/* The pool's claim order (lib/Plan/pool_order.c): on random item graphs
   (duplicate producer entries, zero costs, 1..8 CTAs) it is a
   permutation in topological order; the longest remaining chain goes
   first; a cycle is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pack_internal.h"

static uint32_t next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

static df_status order_of(const df_pool_items *it, uint32_t *order) {
  df_arena a;
  df_allocator al = df_allocator_or_default(NULL);
  df_arena_init(&a, &al);
  df_status st = df_pool_order(it, &a, order);
  df_arena_release(&a);
  return st;
}

static void random_graphs_order_topologically(void **state) {
  (void)state;
  uint64_t seed = 12345;
  enum { N = 120, P = 4 * N };
  double cost[N];
  uint32_t off[N + 1], prods[P], order[N], pos[N];
  for (int round = 0; round < 500; round++) {
    uint32_t n = 1 + next(&seed) % N, np = 0;
    for (uint32_t g = 0; g < n; g++) {
      off[g] = np;
      cost[g] = next(&seed) % 4 ? (double)(next(&seed) % 1000) / 10.0 : 0.0;
      uint32_t k = g ? next(&seed) % 4 : 0;
      for (uint32_t j = 0; j < k; j++)
        prods[np++] = next(&seed) % g; /* earlier items, repeats allowed */
    }
    off[n] = np;
    df_pool_items it = {n, 1 + next(&seed) % 8, cost, off, prods, (double)(next(&seed) % 3)};
    assert_int_equal(order_of(&it, order).code, DF_OK);
    memset(pos, 0xFF, sizeof pos);
    for (uint32_t k = 0; k < n; k++) {
      assert_true(order[k] < n);
      assert_int_equal(pos[order[k]], UINT32_MAX); /* each item once */
      pos[order[k]] = k;
    }
    for (uint32_t g = 0; g < n; g++)
      for (uint32_t j = off[g]; j < off[g + 1]; j++)
        assert_true(pos[prods[j]] < pos[g]);
  }
}

/* Four independent items and a chain 4 -> 5 on one CTA: item 4 (cost 1,
   but 10 more after it) goes first, then the longest of the rest. */
static void longest_chain_first(void **state) {
  (void)state;
  double cost[6] = {3, 2, 5, 4, 1, 10};
  uint32_t off[7] = {0, 0, 0, 0, 0, 0, 1}, prods[1] = {4}, order[6];
  df_pool_items it = {6, 1, cost, off, prods, 0.5};
  assert_int_equal(order_of(&it, order).code, DF_OK);
  /* chains: 4 -> 11.5, 5 -> 10; 4 first; then at t = 1, item 5 (ready
     at 1.5) cannot start, so 2 (5), then 5 (chain 10, ready by then) */
  const uint32_t want[6] = {4, 2, 5, 3, 0, 1};
  for (int k = 0; k < 6; k++)
    assert_int_equal(order[k], want[k]);
}

static void cycles_are_errors(void **state) {
  (void)state;
  double cost[2] = {1, 1};
  uint32_t off[3] = {0, 1, 2}, prods[2] = {1, 0}, order[2];
  df_pool_items it = {2, 2, cost, off, prods, 0};
  df_status st = order_of(&it, order);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "form a cycle"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_graphs_order_topologically),
      cmocka_unit_test(longest_chain_first),
      cmocka_unit_test(cycles_are_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
