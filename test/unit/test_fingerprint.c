/* Plan fingerprint (REFERENCE 5.6) and the SHA-256 under it: FIPS test
   vectors on both compression paths, operator renames keep the
   fingerprint, every scheduling-relevant change moves it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../lib/Plan/sha256.h"
#include "hand_plan.h"
#include "seed_plans.h"

static void digest(bool portable, const void *data, size_t n, size_t chunk, char hex[65]) {
  df_sha256 s;
  if (portable)
    df_sha256_init_portable(&s);
  else
    df_sha256_init(&s);
  const uint8_t *p = data;
  for (size_t at = 0; at < n; at += chunk)
    df_sha256_update(&s, p + at, n - at < chunk ? n - at : chunk);
  uint8_t d[32];
  df_sha256_final(&s, d);
  df_sha256_hex(d, hex);
}

static void sha256_fips_vectors(void **state) {
  (void)state;
  const char *abc448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  char *million = malloc(1000000);
  memset(million, 'a', 1000000);
  const struct {
    const char *msg;
    size_t len;
    const char *hex;
  } v[] = {
      {"abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {abc448, 56, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {million, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  const size_t chunks[] = {1, 7, 63, 64, 65, 1000000};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    for (int portable = 0; portable < 2; portable++)
      for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        if (v[i].len > 1000 && chunks[c] < 63)
          continue;
        char hex[65];
        digest(portable, v[i].msg, v[i].len, chunks[c], hex);
        assert_string_equal(hex, v[i].hex);
      }
  free(million);
}

static void sha256_paths_agree_on_every_length(void **state) {
  (void)state;
  uint8_t buf[300];
  for (int i = 0; i < 300; i++)
    buf[i] = (uint8_t)(i * 131 + 7);
  for (size_t n = 0; n <= 300; n++) {
    char a[65], b[65];
    digest(false, buf, n, 17, a);
    digest(true, buf, n, 300, b);
    assert_string_equal(a, b);
  }
}

static void fingerprint(const df_plan *p, char hex[65]) {
  df_status s = df_plan_fingerprint(p, hex);
  assert_int_equal(s.code, DF_OK);
  assert_int_equal(strlen(hex), 64);
  for (int i = 0; i < 64; i++)
    assert_true((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'));
}

static void fingerprint_is_stable(void **state) {
  (void)state;
  df_plan *p = seed_make_plan(), *q = seed_make_plan(), *c;
  assert_int_equal(df_plan_clone(p, &c).code, DF_OK);
  char a[65], b[65], d[65];
  fingerprint(p, a);
  fingerprint(q, b);
  fingerprint(c, d);
  assert_string_equal(a, b);
  assert_string_equal(a, d);
  df_packed *k;
  assert_int_equal(df_pack(p, NULL, NULL, &k).code, DF_OK);
  assert_string_equal(k->fingerprint, a);
  df_packed_destroy(k);
  df_plan *r = seed_make_reshared_plan();
  fingerprint(r, b);
  assert_string_not_equal(a, b);
  df_plan_destroy(r);
  df_plan_destroy(c);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

static void renaming_operators_keeps_the_fingerprint(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  char a[65], b[65];
  fingerprint(p, a);
  for (uint32_t i = 0; i < p->stage_count; i++) {
    snprintf(p->stages[i].op_name, DF_NAME_MAX, "diagnostic_%u", i);
    snprintf(p->stages[i].name, DF_NAME_MAX, "stage_%u", i);
  }
  fingerprint(p, b);
  assert_string_equal(a, b);
  df_plan_destroy(p);
}

/* Each mutation changes one scheduling-relevant field of the seed plan. */
static void mutate(df_plan *p, int m) {
  switch (m) {
  case 0: p->topology.cluster_size = 4; break;
  case 1: p->block_size = 64; break;
  case 2: snprintf(p->range_axis, DF_NAME_MAX, "kv2"); break;
  case 3: p->policy = DF_POLICY_CLUSTER_LOCAL; break;
  case 4: p->strategy = DF_REDUCE_STREAMING; break;
  case 5: p->extents[0] = 3; break;
  case 6: p->task_lengths[1] = 255; break;
  case 7: p->instrs[0].sm = 1; break;
  case 8: p->instrs[0].range_end = 127; break;
  case 9: p->instrs[3].input_count = 2; break;
  case 10: p->inputs[0] = 1; break;
  case 11: p->instrs[3].output_slot = 4; break;
  case 12: p->instrs[0].variant.iter_mode = DF_ITER_TILE_COUNT; break;
  case 13: p->instrs[0].identity.operator_id = 5; break;
  case 14: p->instrs[0].task = 1; break;
  case 15: p->instrs[2].stage = 1; break;
  case 16: p->instrs[0].op = DF_INSTR_MAP; break;
  case 17: { /* swap two queue entries of SM0 */
    uint32_t t = p->queue_ids[1];
    p->queue_ids[1] = p->queue_ids[2];
    p->queue_ids[2] = t;
    break;
  }
  case 18: p->slots[1].shared_storage = 0; break;
  case 19: p->slots[1].global_storage = 0; break;
  case 20: p->slots[1].owner = 2; break;
  case 21: p->slots[1].scratch_backed = true; break;
  case 22: p->slots[1].producer = 0; break;
  case 23: p->comms[2].flag_epoch = 9; break;
  case 24: p->comms[0].peer_cta_rank = 1; break;
  case 25: p->comms[2].segment_count = 2; break;
  case 26: p->comms[0].dispatch_instr = 3; break;
  case 27: p->comms[0].gate_id = 1; break;
  case 28: p->comm_count = 5; break;
  case 29: p->types[0].bytes = 64; break;
  case 30: p->slots[1].role = DF_ROLE_REDUCED; break;
  case 31: p->comms[4].byte_count = 16; break;
  }
}

static void scheduling_changes_move_the_fingerprint(void **state) {
  (void)state;
  enum { M = 32 };
  char hex[M + 1][65];
  df_plan *base = seed_make_plan();
  fingerprint(base, hex[M]);
  for (int m = 0; m < M; m++) {
    df_plan *p;
    assert_int_equal(df_plan_clone(base, &p).code, DF_OK);
    mutate(p, m);
    fingerprint(p, hex[m]);
    df_plan_destroy(p);
  }
  for (int i = 0; i <= M; i++)
    for (int j = i + 1; j <= M; j++)
      if (strcmp(hex[i], hex[j]) == 0) {
        print_error("mutations %d and %d share a fingerprint\n", i, j);
        fail();
      }
  df_plan_destroy(base);
}

static void fingerprint_errors(void **state) {
  (void)state;
  char hex[65];
  assert_true(hand_error_has(df_plan_fingerprint(NULL, hex), "expects a plan"));
  df_plan *p = seed_make_plan();
  p->queue_lengths[3] = 40;
  assert_true(hand_error_has(df_plan_fingerprint(p, hex), "queue of SM 3 exceeds"));
  df_plan_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sha256_fips_vectors),
      cmocka_unit_test(sha256_paths_agree_on_every_length),
      cmocka_unit_test(fingerprint_is_stable),
      cmocka_unit_test(renaming_operators_keeps_the_fingerprint),
      cmocka_unit_test(scheduling_changes_move_the_fingerprint),
      cmocka_unit_test(fingerprint_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
