// The seed program without its finalize stage: partial -> reduce only
// (skip-unary-reduce refuses it: a task's result would stay a partial).
module {
  "df.intermediate"() {sym_name = "AttnInter", field_names = ["lse", "o"],
                       field_types = [f32, tensor<2x8xf16>]} : () -> ()

  func.func @attention() attributes {df.task_domain = ["batch", "head"],
                                     df.dynamic_ranges = {kv = "seq_lens"}} {
    %partial = "df.partial"() {name = "partial", call = @split_kv, range_axis = "kv",
                               task_args = ["seq", "head"],
                               bind = {Q = "Q", K = "K", V = "V"}}
        : () -> !df.inter<"AttnInter">
    %reduced = "df.reduce"(%partial) {name = "reduce", call = @combine}
        : (!df.inter<"AttnInter">) -> !df.inter<"AttnInter">
    return
  }

  func.func private @split_kv(i32, i32, !df.tensor, !df.tensor, !df.tensor)
      -> !df.inter<"AttnInter">
      attributes {df.kind = "iter", df.params = ["seq", "head", "Q", "K", "V"],
                  df.range = ["kv_begin", "kv_end"]}
  func.func private @combine(!df.list<"AttnInter">) -> !df.inter<"AttnInter">
      attributes {df.kind = "reduce", df.params = ["items"]}
}
