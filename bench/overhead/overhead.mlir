// Runtime-overhead microbenchmarks (bench/overhead): the smallest
// partial -> reduce -> finalize program. One Tok (16 bytes) per
// instruction; handlers in overhead_handlers.c.
//   dispatch plans: partial-only schedules, N ITERs per SM, no comms
//   chain plans:    hand-built by chain_plan.py from this program: one ITER,
//                   then L one-input REDUCEs alternating between two SMs
//                   (every step one cluster or HBM edge), then FINALIZE,
//                   which writes the chain's count (L + 1) to Out[task].
module {
  "df.intermediate"() {sym_name = "Tok", field_names = ["v"],
                       field_types = [tensor<4xf32>]} : () -> ()

  func.func @overhead() attributes {df.task_domain = ["task"],
                                    df.dynamic_ranges = {n = "lens"}} {
    %p = "df.partial"() {name = "partial", call = @ov_iter, range_axis = "n",
                         task_args = ["task"], bind = {}}
        : () -> !df.inter<"Tok">
    %r = "df.reduce"(%p) {name = "step", call = @ov_step}
        : (!df.inter<"Tok">) -> !df.inter<"Tok">
    "df.finalize"(%r) {name = "finalize", call = @ov_finalize, bind = {Out = "Out"}}
        : (!df.inter<"Tok">) -> ()
    return
  }

  func.func private @ov_iter(i32) -> !df.inter<"Tok">
      attributes {df.kind = "iter", df.params = ["task"], df.range = ["begin", "end"]}
  func.func private @ov_step(!df.list<"Tok">) -> !df.inter<"Tok">
      attributes {df.kind = "reduce", df.params = ["items"]}
  func.func private @ov_finalize(!df.inter<"Tok">, i32, !df.tensor)
      attributes {df.kind = "finalize", df.params = ["tok", "task", "Out"]}
}
