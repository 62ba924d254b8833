/* Writes the seed plan (make_plan(), with its program) as a plan blob for
   df-run's end-to-end test: make_seed_blob OUT.dfplan [bare|hung|choices|split], where
   `bare` leaves the program out and `hung` edits the plan before df_pack
   so that its first HBM receive waits for an epoch nobody sends (1000
   more than planned): a launch of it never finishes, which the watchdog
   must report (scripts/gpu/run_seed.sh, test/lit/GPU). `choices` records
   re-plan choices in the program as a plan compiled with
   transfer-tile-bytes=16 reduce-strategy=auto shared-memory-limit=200
   would: re-plans are then tiled and fitted under 200 bytes. `split`
   records block-size=auto: re-plans choose the block again. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "df/blob.h"
#include "seed_plans.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: make_seed_blob OUT.dfplan [bare|hung|choices|split]\n");
    return 2;
  }
  df_plan *plan = seed_make_plan();
  bool bare = argc > 2 && strcmp(argv[2], "bare") == 0;
  if (argc > 2 && strcmp(argv[2], "hung") == 0) {
    uint32_t i = 0;
    while (i < plan->comm_count && plan->comms[i].kind != DF_COMM_HBM_RECV)
      i++;
    if (i == plan->comm_count) {
      fprintf(stderr, "make_seed_blob: the seed plan has no HBM receive\n");
      return 1;
    }
    plan->comms[i].flag_epoch += 1000;
    fprintf(stderr, "make_seed_blob: HBM receive of slot %u -> %u now waits for epoch %u\n",
            plan->comms[i].src_slot, plan->comms[i].dst_slot, plan->comms[i].flag_epoch);
  }
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  df_status s = df_pack(plan, &po, NULL, &k);
  df_plan_destroy(plan);
  if (s.code != DF_OK) {
    fprintf(stderr, "%s\n", s.message);
    return 1;
  }
  df_program *prog = bare ? NULL : seed_attention_program();
  if (argc > 2 && strcmp(argv[2], "choices") == 0) {
    prog->transfer_tile_bytes = 16;
    prog->memory_auto = 1;
    prog->shared_memory_limit = 200;
    prog->auto_policy = DF_POLICY_ROUND_ROBIN;
  }
  if (argc > 2 && strcmp(argv[2], "split") == 0)
    prog->split_auto = 1;
  uint8_t *bytes;
  size_t len;
  s = df_blob_write(k, prog, NULL, &bytes, &len);
  df_program_destroy(prog);
  df_packed_destroy(k);
  if (s.code != DF_OK) {
    fprintf(stderr, "%s\n", s.message);
    return 1;
  }
  FILE *f = fopen(argv[1], "wb");
  int rc = !f || fwrite(bytes, 1, len, f) != len;
  if (f)
    rc |= fclose(f) != 0;
  df_allocator a = df_allocator_default();
  df_free(&a, bytes);
  return rc;
}
