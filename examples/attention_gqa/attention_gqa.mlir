// Split-KV GQA decode attention: partial(split_kv) -> reduce(combine) ->
// finalize(finalize) over the task domain (seq, kv_head) with the dynamic
// range kv <- seq_lens. One task = the G = Hq/Hkv = 4 query heads that
// share one KV head; D = 128. Handlers: attention_gqa_handlers.c.
module {
  "df.intermediate"() {sym_name = "GqaInter", field_names = ["lse", "o"],
                       field_types = [tensor<4xf32>, tensor<4x128xf16>]} : () -> ()

  func.func @attention_gqa() attributes {df.task_domain = ["seq", "kv_head"],
                                         df.dynamic_ranges = {kv = "seq_lens"}} {
    %partial = "df.partial"() {name = "partial", call = @gqa_partial, range_axis = "kv",
                               task_args = ["seq", "kv_head"],
                               bind = {Q = "Q", K = "K", V = "V"}}
        : () -> !df.inter<"GqaInter">
    %reduced = "df.reduce"(%partial) {name = "combine", call = @gqa_combine}
        : (!df.inter<"GqaInter">) -> !df.inter<"GqaInter">
    "df.finalize"(%reduced) {name = "finalize", call = @gqa_finalize, bind = {Output = "O"}}
        : (!df.inter<"GqaInter">) -> ()
    return
  }

  func.func private @gqa_partial(i32, i32, !df.tensor, !df.tensor, !df.tensor)
      -> !df.inter<"GqaInter">
      attributes {df.kind = "iter", df.params = ["seq", "kv_head", "Q", "K", "V"],
                  df.range = ["kv_begin", "kv_end"]}
  func.func private @gqa_combine(!df.list<"GqaInter">) -> !df.inter<"GqaInter">
      attributes {df.kind = "reduce", df.params = ["items"]}
  func.func private @gqa_finalize(!df.inter<"GqaInter">, i32, i32, !df.tensor)
      attributes {df.kind = "finalize", df.params = ["inter", "seq", "kv_head", "Output"]}
}
