// The seed attention (attention.mlir) with implementations chosen by
// capability region (docs/implementations.md): split_kv has one
// implementation for calls of exactly 128 keys, one for 4-tile calls and a
// general one (bodies in attention_impls.c); combine and finalize use df's
// built-in handlers lse_combine and copy. df-select-variants chooses per
// instruction.
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
    "df.finalize"(%reduced) {name = "finalize", call = @finalize, bind = {Output = "O"}}
        : (!df.inter<"AttnInter">) -> ()
    return
  }

  // Handlers: declarations carry the operator kind and parameter names.
  func.func private @split_kv(i32, i32, !df.tensor, !df.tensor, !df.tensor)
      -> !df.inter<"AttnInter">
      attributes {df.kind = "iter", df.params = ["seq", "head", "Q", "K", "V"],
                  df.range = ["kv_begin", "kv_end"]}
  func.func private @combine(!df.list<"AttnInter">) -> !df.inter<"AttnInter">
      attributes {df.kind = "reduce", df.params = ["items"], df.library = "lse_combine"}
  func.func private @finalize(!df.inter<"AttnInter">, i32, i32, !df.tensor)
      attributes {df.kind = "finalize", df.params = ["inter", "seq", "head", "Output"],
                  df.library = "copy"}

  // Implementations: (!llvm.ptr) -> () functions (the df_ctx pointer) whose
  // bodies come from linked bitcode.
  func.func private @split_kv_len128(!llvm.ptr)
      attributes {df.implements = @split_kv, df.length = 128}
  func.func private @split_kv_tiles4(!llvm.ptr)
      attributes {df.implements = @split_kv, df.tiles = 4, df.min_arch = "sm_90"}
  func.func private @split_kv_general(!llvm.ptr)
      attributes {df.implements = @split_kv, df.general}
}
