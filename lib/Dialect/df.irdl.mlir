// The df dialect, declared in IRDL and loaded at run time. IRDL gives the
// structural checks (operand/result types, required attributes); every
// semantic rule lives in the df-verify pass.
irdl.dialect @df {
  // An intermediate value or a stream of them, named by its df.intermediate.
  irdl.type @inter {
    %name = irdl.base "#builtin.string"
    irdl.parameters(name: %name)
  }
  // A collection of intermediates (the parameter of an n-ary reducer).
  irdl.type @list {
    %name = irdl.base "#builtin.string"
    irdl.parameters(name: %name)
  }
  // An external tensor argument of a handler.
  irdl.type @tensor {
    irdl.parameters()
  }

  // A typed intermediate: ordered field names and field types
  // (scalar element types or ranked tensors of them).
  irdl.operation @intermediate {
    %sym = irdl.base "#builtin.string"
    %names = irdl.base "#builtin.array"
    %types = irdl.base "#builtin.array"
    irdl.attributes {"sym_name" = %sym, "field_names" = %names, "field_types" = %types}
  }

  // The iter operator over one dynamic range axis (canonical pipeline).
  irdl.operation @partial {
    %any = irdl.any
    %t = irdl.parametric @df::@inter<%any>
    %call = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"call" = %call}
    irdl.results(out: %t)
  }
  // A map stage, optionally consuming an upstream stream.
  irdl.operation @map {
    %any = irdl.any
    %t = irdl.parametric @df::@inter<%any>
    %any2 = irdl.any
    %u = irdl.parametric @df::@inter<%any2>
    %call = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"call" = %call}
    irdl.operands(input: optional %u)
    irdl.results(out: %t)
  }
  // Re-shards an upstream stream across the ranks of a cluster.
  irdl.operation @reshared {
    %any = irdl.any
    %t = irdl.parametric @df::@inter<%any>
    %any2 = irdl.any
    %u = irdl.parametric @df::@inter<%any2>
    irdl.operands(input: %u)
    irdl.results(out: %t)
  }
  // Combines the partials of one task.
  irdl.operation @reduce {
    %any = irdl.any
    %t = irdl.parametric @df::@inter<%any>
    %any2 = irdl.any
    %u = irdl.parametric @df::@inter<%any2>
    %call = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"call" = %call}
    irdl.operands(input: %u)
    irdl.results(out: %t)
  }
  // Consumes the last stream and writes the outputs.
  irdl.operation @finalize {
    %any = irdl.any
    %u = irdl.parametric @df::@inter<%any>
    %call = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"call" = %call}
    irdl.operands(input: %u)
  }

  // The plan in IR (written by df-schedule, readable and editable by hand):
  // one df.plan (topology, block size, task lengths and extents), one
  // df.queue per SM, and df.instr / df.slot / df.comm records with named
  // attributes. df.packed holds the ABI records as constants (df-pack).
  irdl.operation @plan {
  }
  irdl.operation @queue {
  }
  irdl.operation @instr {
  }
  irdl.operation @slot {
  }
  irdl.operation @comm {
  }
  irdl.operation @packed {
  }

  // Handler accessors (docs/codegen.md): the ops a handler body with the
  // signature (!llvm.ptr) -> () uses to read its df_ctx, lowered to calls
  // of the device runtime's df_ctx_*_fn functions. Integer results and
  // index operands are i32 or index; slot and tensor pointers are
  // !llvm.ptr or a memref with a static shape. IRDL names take no dots,
  // hence ctx_*.
  // the instruction's task id
  irdl.operation @ctx_task_id {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // number of task coordinates
  irdl.operation @ctx_task_coord_count {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // task coordinate i
  irdl.operation @ctx_task_coord {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    %ri32 = irdl.is i32
    %rindex = irdl.is index
    %rint = irdl.any_of(%ri32, %rindex)
    irdl.operands(ctx: %ctx, index: %int)
    irdl.results(value: %rint)
  }
  // range begin (0 without a range)
  irdl.operation @ctx_range_begin {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // range end
  irdl.operation @ctx_range_end {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // the plan's range block size
  irdl.operation @ctx_block_size {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // range blocks this call covers: ceil((end - begin) / block_size)
  irdl.operation @ctx_tiles {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // number of input slots
  irdl.operation @ctx_input_count {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // input slot i (optional `field`: that field's bytes)
  irdl.operation @ctx_input {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    %memref = irdl.base "!builtin.memref"
    %ptr = irdl.any_of(%ctx, %memref)
    irdl.operands(ctx: %ctx, index: %int)
    irdl.results(ptr: %ptr)
  }
  // the output slot (null pointer without one; optional `field`)
  irdl.operation @ctx_output {
    %ctx = irdl.is !llvm.ptr
    %memref = irdl.base "!builtin.memref"
    %ptr = irdl.any_of(%ctx, %memref)
    irdl.operands(ctx: %ctx)
    irdl.results(ptr: %ptr)
  }
  // tensor argument i's data
  irdl.operation @ctx_tensor {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    %memref = irdl.base "!builtin.memref"
    %ptr = irdl.any_of(%ctx, %memref)
    irdl.operands(ctx: %ctx, index: %int)
    irdl.results(ptr: %ptr)
  }
  // tensor argument i's dtype code
  irdl.operation @ctx_tensor_dtype {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    %ri32 = irdl.is i32
    %rindex = irdl.is index
    %rint = irdl.any_of(%ri32, %rindex)
    irdl.operands(ctx: %ctx, index: %int)
    irdl.results(value: %rint)
  }
  // tensor argument i's element bits
  irdl.operation @ctx_tensor_bits {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    %ri32 = irdl.is i32
    %rindex = irdl.is index
    %rint = irdl.any_of(%ri32, %rindex)
    irdl.operands(ctx: %ctx, index: %int)
    irdl.results(value: %rint)
  }
  // tensor argument i's rank
  irdl.operation @ctx_tensor_ndim {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    %ri32 = irdl.is i32
    %rindex = irdl.is index
    %rint = irdl.any_of(%ri32, %rindex)
    irdl.operands(ctx: %ctx, index: %int)
    irdl.results(value: %rint)
  }
  // this thread's index in the CTA
  irdl.operation @ctx_thread {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // threads in the CTA
  irdl.operation @ctx_threads {
    %ctx = irdl.is !llvm.ptr
    %i32 = irdl.is i32
    %index = irdl.is index
    %int = irdl.any_of(%i32, %index)
    irdl.operands(ctx: %ctx)
    irdl.results(value: %int)
  }
  // CTA-wide barrier
  irdl.operation @ctx_barrier {
    %ctx = irdl.is !llvm.ptr
    irdl.operands(ctx: %ctx)
  }
}
