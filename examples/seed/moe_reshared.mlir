// The seed's make_reshared_program(): MoE as the stage graph
// map1 -> reshared gather_up (hbm_all_gather) -> map2 -> finalize over the
// task domain (expert, token).
module {
  "df.intermediate"() {sym_name = "UpShard", field_names = ["value"],
                       field_types = [tensor<2x4xf16>]} : () -> ()
  "df.intermediate"() {sym_name = "UpFull", field_names = ["value"],
                       field_types = [tensor<2x8xf16>]} : () -> ()
  "df.intermediate"() {sym_name = "HiddenShard", field_names = ["value"],
                       field_types = [tensor<2x4xf16>]} : () -> ()

  func.func @moe_reshared() attributes {
      df.task_domain = ["expert", "token"],
      df.dynamic_ranges = {expert_tile = "expert_tiles", hidden_tile = "hidden_tiles"}} {
    %up = "df.map"() {name = "map1", call = @moe_map1, range_axis = "expert_tile",
                      task_args = ["expert", "token"], bind = {Input = "Input", W1 = "W1"}}
        : () -> !df.inter<"UpShard">
    %full = "df.reshared"(%up) {name = "gather_up", output_type = "UpFull",
                                output_arity = 2 : i64, policy = "hbm_all_gather"}
        : (!df.inter<"UpShard">) -> !df.inter<"UpShard">
    %hidden = "df.map"(%full) {name = "map2", call = @moe_map2, range_axis = "hidden_tile",
                               task_args = ["expert", "token"], bind = {W2 = "W2"}}
        : (!df.inter<"UpShard">) -> !df.inter<"HiddenShard">
    "df.finalize"(%hidden) {name = "finalize", call = @finalize_hidden,
                            bind = {Output = "Output"}}
        : (!df.inter<"HiddenShard">) -> ()
    return
  }

  func.func private @moe_map1(i32, i32, !df.tensor, !df.tensor) -> !df.inter<"UpShard">
      attributes {df.kind = "map", df.params = ["expert", "token", "Input", "W1"],
                  df.range = ["expert_begin", "expert_end"]}
  func.func private @moe_map2(!df.list<"UpShard">, i32, i32, !df.tensor)
      -> !df.inter<"HiddenShard">
      attributes {df.kind = "map", df.params = ["parts", "expert", "token", "W2"],
                  df.range = ["hidden_begin", "hidden_end"]}
  func.func private @finalize_hidden(!df.inter<"HiddenShard">, i32, i32, !df.tensor)
      attributes {df.kind = "finalize", df.params = ["hidden", "expert", "token", "Output"]}
}
