// The seed attention program (examples/seed/attention.mlir) with its
// handlers written in MLIR: the same split-KV partial / LSE combine /
// finalize as examples/seed/attention_handlers.c, compiled by
// `df-translate --df-to-ptx` without any --df-link bitcode.
//
// A handler with a body takes the df_ctx pointer (!llvm.ptr) and declares
// the signature the program calls in df.signature. It reads its context
// through the df.ctx_* ops (lowered to the device runtime's accessors);
// slot fields and tensors come back as memrefs (AttnInter = {lse: f32,
// o: f16[2,8]}: lse at byte 0, o at byte 4; REFERENCE 1.4).
// Tensors: Q f16[tasks][16]; K, V f16[tasks][4096][16]; O f32[tasks][16].
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

  // q . k_j for query row `t`, key `j` (head dim 16), scaled by 1/sqrt(16).
  func.func private @score(%q: memref<?x16xf16>, %k: memref<?x4096x16xf16>, %t: index,
                           %j: index) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %scale = arith.constant 0.25 : f32
    %dot = scf.for %d = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> (f32) {
      %qd = memref.load %q[%t, %d] : memref<?x16xf16>
      %kd = memref.load %k[%t, %j, %d] : memref<?x4096x16xf16>
      %qf = arith.extf %qd : f16 to f32
      %kf = arith.extf %kd : f16 to f32
      %next = math.fma %qf, %kf, %acc : f32
      scf.yield %next : f32
    }
    %s = arith.mulf %dot, %scale : f32
    return %s : f32
  }

  // Partial attention of query `task` over keys [begin, end): every thread
  // computes the running max and sum; thread d owns output column d.
  func.func @split_kv(%ctx: !llvm.ptr) attributes {
      df.kind = "iter", df.params = ["seq", "head", "Q", "K", "V"],
      df.range = ["kv_begin", "kv_end"],
      df.signature = (i32, i32, !df.tensor, !df.tensor, !df.tensor) -> !df.inter<"AttnInter">} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %t = "df.ctx_task_id"(%ctx) : (!llvm.ptr) -> index
    %begin = "df.ctx_range_begin"(%ctx) : (!llvm.ptr) -> index
    %end = "df.ctx_range_end"(%ctx) : (!llvm.ptr) -> index
    %q = "df.ctx_tensor"(%ctx, %c0) : (!llvm.ptr, index) -> memref<?x16xf16>
    %k = "df.ctx_tensor"(%ctx, %c1) : (!llvm.ptr, index) -> memref<?x4096x16xf16>
    %v = "df.ctx_tensor"(%ctx, %c2) : (!llvm.ptr, index) -> memref<?x4096x16xf16>
    %o = "df.ctx_output"(%ctx) {field = "o"} : (!llvm.ptr) -> memref<16xf16>
    %lse = "df.ctx_output"(%ctx) {field = "lse"} : (!llvm.ptr) -> memref<f32>
    %m, %l = scf.for %j = %begin to %end step %c1 iter_args(%m0 = %ninf, %l0 = %zero)
        -> (f32, f32) {
      %s = func.call @score(%q, %k, %t, %j)
          : (memref<?x16xf16>, memref<?x4096x16xf16>, index, index) -> f32
      %m2 = arith.maxnumf %s, %m0 : f32
      %dm = arith.subf %m0, %m2 : f32
      %ds = arith.subf %s, %m2 : f32
      %e1 = math.exp %dm : f32
      %e2 = math.exp %ds : f32
      %l2 = math.fma %l0, %e1, %e2 : f32
      scf.yield %m2, %l2 : f32, f32
    }
    %tid = "df.ctx_thread"(%ctx) : (!llvm.ptr) -> index
    %nth = "df.ctx_threads"(%ctx) : (!llvm.ptr) -> index
    scf.for %d = %tid to %c16 step %nth {
      %acc = scf.for %j = %begin to %end step %c1 iter_args(%a0 = %zero) -> (f32) {
        %s = func.call @score(%q, %k, %t, %j)
            : (memref<?x16xf16>, memref<?x4096x16xf16>, index, index) -> f32
        %x = arith.subf %s, %m : f32
        %w = math.exp %x : f32
        %vd = memref.load %v[%t, %j, %d] : memref<?x4096x16xf16>
        %vf = arith.extf %vd : f16 to f32
        %a1 = math.fma %w, %vf, %a0 : f32
        scf.yield %a1 : f32
      }
      %r = arith.divf %acc, %l : f32
      %h = arith.truncf %r : f32 to f16
      memref.store %h, %o[%d] : memref<16xf16>
    }
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      %lg = math.log %l : f32
      %value = arith.addf %m, %lg : f32
      memref.store %value, %lse[] : memref<f32>
    }
    "df.ctx_barrier"(%ctx) : (!llvm.ptr) -> ()
    return
  }

  // LSE combine of the task's partials: weights exp(lse_i - max lse).
  func.func @combine(%ctx: !llvm.ptr) attributes {
      df.kind = "reduce", df.params = ["items"],
      df.signature = (!df.list<"AttnInter">) -> !df.inter<"AttnInter">} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %n = "df.ctx_input_count"(%ctx) : (!llvm.ptr) -> index
    %mx = scf.for %i = %c0 to %n step %c1 iter_args(%m0 = %ninf) -> (f32) {
      %p = "df.ctx_input"(%ctx, %i) {field = "lse"} : (!llvm.ptr, index) -> memref<f32>
      %x = memref.load %p[] : memref<f32>
      %m1 = arith.maxnumf %x, %m0 : f32
      scf.yield %m1 : f32
    }
    %sum = scf.for %i = %c0 to %n step %c1 iter_args(%s0 = %zero) -> (f32) {
      %p = "df.ctx_input"(%ctx, %i) {field = "lse"} : (!llvm.ptr, index) -> memref<f32>
      %x = memref.load %p[] : memref<f32>
      %dx = arith.subf %x, %mx : f32
      %w = math.exp %dx : f32
      %s1 = arith.addf %s0, %w : f32
      scf.yield %s1 : f32
    }
    %o = "df.ctx_output"(%ctx) {field = "o"} : (!llvm.ptr) -> memref<16xf16>
    %tid = gpu.thread_id x
    %nth = gpu.block_dim x
    scf.for %d = %tid to %c16 step %nth {
      %acc = scf.for %i = %c0 to %n step %c1 iter_args(%a0 = %zero) -> (f32) {
        %pl = "df.ctx_input"(%ctx, %i) {field = "lse"} : (!llvm.ptr, index) -> memref<f32>
        %po = "df.ctx_input"(%ctx, %i) {field = "o"} : (!llvm.ptr, index) -> memref<16xf16>
        %x = memref.load %pl[] : memref<f32>
        %dx = arith.subf %x, %mx : f32
        %w = math.exp %dx : f32
        %od = memref.load %po[%d] : memref<16xf16>
        %of = arith.extf %od : f16 to f32
        %a1 = math.fma %w, %of, %a0 : f32
        scf.yield %a1 : f32
      }
      %r = arith.divf %acc, %sum : f32
      %h = arith.truncf %r : f32 to f16
      memref.store %h, %o[%d] : memref<16xf16>
    }
    gpu.barrier
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      %lse = "df.ctx_output"(%ctx) {field = "lse"} : (!llvm.ptr) -> memref<f32>
      %lg = math.log %sum : f32
      %value = arith.addf %mx, %lg : f32
      memref.store %value, %lse[] : memref<f32>
    }
    gpu.barrier
    return
  }

  // The combined output row of the task as f32.
  func.func @finalize(%ctx: !llvm.ptr) attributes {
      df.kind = "finalize", df.params = ["inter", "seq", "head", "Output"],
      df.signature = (!df.inter<"AttnInter">, i32, i32, !df.tensor) -> ()} {
    %c0 = arith.constant 0 : index
    %c3 = arith.constant 3 : i32
    %c16 = arith.constant 16 : index
    %t = "df.ctx_task_id"(%ctx) : (!llvm.ptr) -> index
    %in = "df.ctx_input"(%ctx, %c0) {field = "o"} : (!llvm.ptr, index) -> memref<16xf16>
    %out = "df.ctx_tensor"(%ctx, %c3) : (!llvm.ptr, i32) -> memref<?x16xf32>
    %tid = "df.ctx_thread"(%ctx) : (!llvm.ptr) -> index
    %nth = "df.ctx_threads"(%ctx) : (!llvm.ptr) -> index
    scf.for %d = %tid to %c16 step %nth {
      %x = memref.load %in[%d] : memref<16xf16>
      %f = arith.extf %x : f16 to f32
      memref.store %f, %out[%t, %d] : memref<?x16xf32>
    }
    return
  }
}
