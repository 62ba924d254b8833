// Fused MoE layer (issue 10, workload 2) as the reshared stage graph
//   gate_up (map) -> gather_h (hbm_all_gather) -> down (map)
// over a one-axis task domain "work": each task is one token tile (at most
// MOE_TT = 64 tokens) of one expert, described by row `work` of the Tasks
// table (expert, first row in the expert-sorted token list, token count).
// The host builds that table from the routing: heavy experts get several
// tiles and the tasks are ordered so that round-robin over the clusters
// balances weight bytes and tokens (examples/moe/moe_fused_gen.c).
//
// Each task runs on one cluster of MOE_CS = 4 SMs. gate_up's range (inter,
// 768 per task) is cut into 4 shards of 192 intermediate columns: rank r
// computes h = SiLU(x Wg^T) * (x Wu^T) for its columns and all tokens of the
// tile; gather_h gives every rank the 4 shards (DSMEM inside the cluster);
// down's range (hidden, 2048 per task) is cut into 4 shards of 512 output
// columns: rank r computes y = h Wd^T for its columns and adds
// routing_weight * y into Output straight from the accumulators (fp32, two
// contributions per element, so the order does not matter). There is no
// finalize stage: a [64][512] y tile in shared memory would cost 64 KiB per
// task, and the slot layout gives every task of a CTA its own regions.
// Output starts as zeros without a memset: gate_up's warps zero it in
// chunks claimed through the Sync counters and down waits for them
// (examples/moe/moe_zero_output.h).
//
// Types (bf16):
//   UpShard   [6][64][32]: 192 columns in chunks of 32, token-major inside a
//             chunk (conflict-free 16-byte shared loads in down)
//   UpFull    the logical gather of the 4 shards
//   DownDone  [4] x i32: tokens the rank added (for inspection)
module {
  "df.intermediate"() {sym_name = "UpShard", field_names = ["h"],
                       field_types = [tensor<6x64x32xbf16>]} : () -> ()
  "df.intermediate"() {sym_name = "UpFull", field_names = ["h"],
                       field_types = [tensor<4x6x64x32xbf16>]} : () -> ()
  "df.intermediate"() {sym_name = "DownDone", field_names = ["count"],
                       field_types = [tensor<4xi32>]} : () -> ()

  func.func @moe_fused() attributes {
      df.task_domain = ["work"],
      df.dynamic_ranges = {inter = "inter_lengths", hidden = "hidden_lengths"}} {
    %h = "df.map"() {name = "gate_up", call = @moe_gate_up, range_axis = "inter",
                     task_args = ["work"],
                     bind = {X = "X", Wgu = "Wgu", Tasks = "Tasks", Tokens = "Tokens",
                             Output = "Output", Sync = "Sync"}}
        : () -> !df.inter<"UpShard">
    %full = "df.reshared"(%h) {name = "gather_h", output_type = "UpFull",
                               output_arity = 4 : i64, policy = "hbm_all_gather"}
        : (!df.inter<"UpShard">) -> !df.inter<"UpShard">
    %done = "df.map"(%full) {name = "down", call = @moe_down, range_axis = "hidden",
                             task_args = ["work"],
                             bind = {Wd = "Wd", Tasks = "Tasks", Tokens = "Tokens",
                                     Weights = "Weights", Output = "Output", Sync = "Sync"}}
        : (!df.inter<"UpShard">) -> !df.inter<"DownDone">
    return
  }

  func.func private @moe_gate_up(i32, !df.tensor, !df.tensor, !df.tensor, !df.tensor,
                                 !df.tensor, !df.tensor) -> !df.inter<"UpShard">
      attributes {df.kind = "map",
                  df.params = ["work", "X", "Wgu", "Tasks", "Tokens", "Output", "Sync"],
                  df.range = ["inter_begin", "inter_end"]}
  func.func private @moe_down(!df.list<"UpShard">, i32, !df.tensor, !df.tensor, !df.tensor,
                              !df.tensor, !df.tensor, !df.tensor) -> !df.inter<"DownDone">
      attributes {df.kind = "map",
                  df.params = ["parts", "work", "Wd", "Tasks", "Tokens", "Weights", "Output",
                               "Sync"],
                  df.range = ["hidden_begin", "hidden_end"]}
}
