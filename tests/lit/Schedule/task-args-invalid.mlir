// RUN: mk-opt %s -split-input-file -verify-diagnostics

// A task of a registered kind carries its kind's arguments, the attributes
// its op declares (ScheduleOps.td; when each is required:
// mk/Dialect/Schedule/TaskKinds.h): missing, mistyped, zero or out of range
// is a located error when the IR is read, before any pass (these once
// divided by zero in the partitioner or indexed past an empty list of cuts),
// and the buffers and weights they name must be the kernel's.

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'group' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {reads = [@x], writes = [@y], weights = ["w"], k = 256 : i64, group = 0 : i64, n = [256], input = @x, outputs = [@y]}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op requires attribute 'group'}}
    schedule.w4a16_gemv "g" {reads = [@x], writes = [@y], weights = ["w"], k = 256 : i64, n = [256], input = @x, outputs = [@y]}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @r {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'rows' failed to satisfy constraint}}
    schedule.bf16_rows "r" {reads = [@x], writes = [@y], weight = "r", output = @y, rows = -3 : i64, k = 256 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @kv_b.w_q {dtype = "u8", shape = array<i64: 256, 512>, group = 128 : i64}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 512>}
  schedule.buffer @qa {dtype = "f32", shape = array<i64: 1024>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'nope' failed to satisfy constraint}}
    schedule.mla_q_absorb "a" {writes = [@q, @qa], q = @q, q_abs = @qa, kv_b = "kv_b", nope = 0 : i64, lora = 512 : i64, heads = 2 : i64, v_head = 128 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{op requires attribute 'c_kv'}}
    schedule.mla_attention_chunk "a" {lora = 512 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'n' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {reads = [@x], writes = [@y], weights = ["w"], k = 256 : i64, group = 32 : i64, n = [-256], input = @x, outputs = [@y]}
  }
}

// -----

// An integer past the kernel's 32-bit index arithmetic.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @y {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'n' failed to satisfy constraint}}
    schedule.zero_f32 "z" {writes = [@y], buffer = @y, n = 4294967296 : i64}
  }
}

// -----

// A partition argument is checked when present (schedule-partition-work adds
// it; the emitter requires it).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'tn' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {reads = [@x], writes = [@y], weights = ["w"], k = 256 : i64, group = 32 : i64, n = [256], input = @x, outputs = [@y], tn = "wide"}
  }
}

// -----

// A routed expert task (its `logits` set) also carries the router's
// top-k arguments.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @d.w_q {dtype = "u8", shape = array<i64: 4, 64, 256>, group = 128 : i64}
  schedule.buffer @s {dtype = "f32", shape = array<i64: 2048>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @l {dtype = "bf16", shape = array<i64: 4>}
  schedule.phase "p" {
    schedule.zero_f32 "z" {writes = [@s, @acc], buffer = @s, n = 2048 : i64}
    schedule.opaque "l" {writes = [@l]}
  }
  schedule.barrier
  schedule.phase "q" {
    // expected-error @+1 {{argument 'experts' is missing (an integer in 1..2147483647)}}
    schedule.moe_down "d" {reads = [@s, @l], accumulates = [@acc], down = "d", sums = @s, acc = @acc, logits = @l, hidden = 256 : i64, inter = 128 : i64, slots = 2 : i64, group = 128 : i64}
  }
}

// -----

// The names resolve to the kernel's buffers and weights.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{argument 'input' must be a buffer of the kernel; there is no buffer @nowhere}}
    schedule.w4a16_gemv "g" {reads = [@x], writes = [@y], weights = ["w"], k = 256 : i64, group = 32 : i64, n = [256], input = @nowhere, outputs = [@y]}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{argument 'weights' names weight 'v', which is no schedule.weight of the kernel}}
    schedule.w4a16_gemv "g" {reads = [@x], writes = [@y], weights = ["v"], k = 256 : i64, group = 32 : i64, n = [256], input = @x, outputs = [@y]}
  }
}

// -----

// A task of kind `opaque` has no argument specs (the analysis
// passes' tests use such tasks; the partitioner and the emitter refuse them):
// its `args` say what the test means and are not read.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    schedule.opaque "o" {writes = [@y], args = {anything = "goes"}}
  }
}

// -----

// A registered kind's arguments are the attributes its op declares: any
// other (without a dialect prefix) is refused, naming those there are.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @y {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{'schedule.zero_f32' op has no argument 'size' (a zero_f32 task's arguments: buffer, n)}}
    schedule.zero_f32 "z" {buffer = @y, n = 256 : i64, size = 256 : i64}
  }
}

// -----

// An attribute with a dialect prefix (another tool's annotation) stays.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @y {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "p" {
    schedule.zero_f32 "z" {buffer = @y, n = 256 : i64, tool.note = "kept"}
  }
}

// -----

// A buffer argument is a symbol reference: a string naming the buffer is
// refused by name (the access it implies could not be checked).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'input' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {weights = ["w"], k = 256 : i64, group = 128 : i64, n = [256], input = "x", outputs = [@y]}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'outputs' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {weights = ["w"], k = 256 : i64, group = 128 : i64, n = [256], input = @x, outputs = ["y"]}
  }
}

// -----

// `captures` (the debug-capture names of a task's values, from the
// frontend's graph.capture) is an array of strings where present.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'captures' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {weights = ["w"], k = 256 : i64, group = 128 : i64, n = [256], input = @x, outputs = [@y], captures = [3]}
  }
}

// -----

// The GQA kinds: the append's theta is a number, its norms weights.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @qn {dtype = "bf16", shape = array<i64: 64>}
  schedule.weight @kn {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @v {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @qr {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @kc {dtype = "bf16", shape = array<i64: -1, 2, 64>, space = "state"}
  schedule.buffer @vc {dtype = "bf16", shape = array<i64: -1, 2, 64>, space = "state"}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'theta' failed to satisfy constraint}}
    schedule.gqa_rope_append "a" {eps = 1.0e-06 : f64, head_dim = 64 : i64, heads = 4 : i64, k = @k, k_cache = @kc, k_norm = "kn", kv_heads = 2 : i64, q = @q, q_norm = "qn", q_out = @qr, theta = 10000 : i64, v = @v, v_cache = @vc}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @kc {dtype = "bf16", shape = array<i64: -1, 2, 64>, space = "state"}
  schedule.buffer @vc {dtype = "bf16", shape = array<i64: -1, 2, 64>, space = "state"}
  schedule.buffer @pm {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @pl {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @pa {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op requires attribute 'kv_heads'}}
    schedule.gqa_attention_chunk "a" {head_dim = 64 : i64, heads = 4 : i64, k_cache = @kc, part_acc = @pa, part_l = @pl, part_m = @pm, q = @q, v_cache = @vc}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @pm {dtype = "f32", shape = array<i64: 4>, space = "io"}
  schedule.buffer @pl {dtype = "f32", shape = array<i64: 4>, space = "io"}
  schedule.buffer @pa {dtype = "f32", shape = array<i64: 256>, space = "io"}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'o' failed to satisfy constraint}}
    schedule.gqa_combine "c" {head_dim = 64 : i64, heads = 4 : i64, o = "o", part_acc = @pa, part_l = @pl, part_m = @pm}
  }
}

// -----

// A GEMV's epilogue is "bf16" (also when absent) or "atomic_f32": a typo
// would have stored bf16 where fp32 sums were meant.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "z" {
    schedule.zero_f32 "z" {buffer = @y, n = 256 : i64}
  }
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'epilogue' failed to satisfy constraint}}
    schedule.w4a16_gemv "g" {weights = ["w"], k = 256 : i64, group = 128 : i64, n = [256], input = @x, outputs = [@y], epilogue = "atomic_32"}
  }
}

// -----

// Every argument a kind's lowering reads is declared: the MLA tasks' rope
// width (a task without it once reached the emitter as 0).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @kv_b.w_q {dtype = "u8", shape = array<i64: 256, 512>, group = 128 : i64}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 384>}
  schedule.buffer @qa {dtype = "f32", shape = array<i64: 1024>}
  schedule.phase "p" {
    // expected-error @+1 {{op requires attribute 'rope'}}
    schedule.mla_q_absorb "a" {writes = [@q, @qa], q = @q, q_abs = @qa, kv_b = "kv_b", nope = 128 : i64, lora = 512 : i64, heads = 2 : i64, v_head = 128 : i64}
  }
}

// -----

// A task's partition is one of the dialect's (#schedule.partition<...>):
// an unknown one, or the name as a bare string, is refused where it stands.

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @b {dtype = "f32", shape = array<i64: 4>}
  schedule.phase "p" {
    // expected-error @+2 {{expected ::mk::schedule::Partition to be one of: every_block, cols, split_k, rows, heads, experts, chunks, slices, channels}}
    // expected-error @+1 {{failed to parse Schedule_PartitionAttr parameter 'value'}}
    schedule.zero_f32 "z" {partition = #schedule.partition<diagonal>, buffer = @b, n = 4 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @b {dtype = "f32", shape = array<i64: 4>}
  schedule.phase "p" {
    // expected-error @+1 {{op attribute 'partition' failed to satisfy constraint: how a task's work is cut into instances}}
    schedule.zero_f32 "z" {partition = "slices", buffer = @b, n = 4 : i64}
  }
}
