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
}
