// RUN: mk-opt %s -split-input-file -verify-diagnostics

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "produce" {
    schedule.opaque "p" {count = 8 : i64, writes = [@x]}
  }
  schedule.phase "consume" {
    // expected-error @+1 {{accesses @x after task 'p' without a barrier or counter between them}}
    schedule.opaque "c" {reads = [@x]}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 64>}
  schedule.phase "acc" {
    // expected-error @+1 {{accumulates into @x which no earlier, ordered task initializes}}
    schedule.opaque "a" {accumulates = [@x]}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "c" {reads = [@x]}
    schedule.opaque "p" {writes = [@x]}
    schedule.signal @c {task = "p"}
    // expected-error @+1 {{waits on @c signaled by task 'p' which does not come before task 'c' (possible deadlock)}}
    schedule.wait @c {task = "c", target = 1 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "p" {count = 2 : i64, writes = [@x]}
    schedule.signal @c {task = "p", divisor = 2 : i64}
  }
  schedule.phase "q" {
    schedule.opaque "c" {reads = [@x]}
    // expected-error @+1 {{waits for 3 signals on @c[0] which receives only 2}}
    schedule.wait @c {task = "c", target = 3 : i64}
  }
}

// -----

// expected-error @+1 {{threads must be a positive multiple of 32}}
schedule.kernel @k attributes {threads = 100 : i64} {
}

// -----

// A negative count is refused as what it is (the attributes' getters are
// unsigned; the verifiers read them as signed).
// expected-error @+1 {{target_sms must be positive, got -1}}
schedule.kernel @k attributes {threads = 128 : i64, target_sms = -1 : i64} {
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{size must be positive, got -1}}
  schedule.counter @c {size = -1 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "p" {count = 2 : i64, writes = [@x]}
    // expected-error @+1 {{divisor must be positive, got -2}}
    schedule.signal @c {task = "p", divisor = -2 : i64}
  }
}

// -----

// A weight's storage: a packed order needs a .w_q part in 128- or 64-wide
// tiles; tiles are multiples of 16 up to 128 columns, on W4A16 parts only,
// dividing the columns; the parts of one weight are stored alike.
schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{order 'mma' needs a .w_q part stored in 128- or 64-wide tiles, got tile 32}}
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 64, 128>, group = 32 : i64, tile = 32 : i64, order = "mma"}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{order 'int8' needs a .w_q part stored in 128- or 64-wide tiles, got tile 128}}
  schedule.weight @w.scales {dtype = "bf16", shape = array<i64: 4, 128>, group = 32 : i64, tile = 128 : i64, order = "int8"}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{order must be "mma" or "int8" (or absent), got "fp8"}}
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 64, 128>, group = 32 : i64, tile = 128 : i64, order = "fp8"}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{tile must be 0 (row-major) or, on a W4A16 part, a multiple of 16 up to 128 columns, got 24}}
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 64, 128>, group = 32 : i64, tile = 24 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{tile must be 0 (row-major) or, on a W4A16 part, a multiple of 16 up to 128 columns, got 64}}
  schedule.weight @norm {dtype = "bf16", shape = array<i64: 128>, tile = 64 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{tile 64 does not divide its 96 columns}}
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 64, 96>, group = 32 : i64, tile = 64 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 64, 128>, group = 32 : i64, tile = 128 : i64, order = "mma"}
  // expected-error @+1 {{tile 0 differs from w.w_q's 128 (a W4A16 weight's parts are stored alike)}}
  schedule.weight @w.scales {dtype = "bf16", shape = array<i64: 4, 128>, group = 32 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{unknown dtype 'f16'}}
  schedule.weight @w {dtype = "f16", shape = array<i64: 4>}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{dimension 0 is not positive}}
  schedule.weight @w {dtype = "bf16", shape = array<i64: 4, 0>}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{is larger than 2^48 bytes}}
  schedule.weight @w {dtype = "f32", shape = array<i64: 1048576, 1048576, 1048576>}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{only the w_q, scales and zeros of a W4A16 weight have a group}}
  schedule.weight @norm {dtype = "bf16", shape = array<i64: 4, 4>, group = 32 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{group 33 is odd (w_q packs two input rows per byte)}}
  schedule.weight @p.w_q {dtype = "u8", shape = array<i64: 66, 16>, group = 33 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{w_q's 96 input rows are not a whole number of groups of 64}}
  schedule.weight @p.w_q {dtype = "u8", shape = array<i64: 48, 16>, group = 64 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{a W4A16 part is at least [rows, cols]}}
  schedule.weight @p.scales {dtype = "bf16", shape = array<i64: 16>, group = 32 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{group must be non-negative, got -2}}
  schedule.weight @p.w_q {dtype = "u8", shape = array<i64: 16, 16>, group = -2 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w {dtype = "bf16", shape = array<i64: 4>}
  // expected-error @+2 {{redefinition of symbol named 'w'}}
  // expected-note @-2 {{see existing symbol definition here}}
  schedule.buffer @w {dtype = "bf16", shape = array<i64: 4>}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x]}
  }
  schedule.barrier
  schedule.phase "q" {
    // A registered kind's buffer arguments say its accesses; a list that
    // repeats one must say the same.
    // expected-error @+1 {{lists @x in writes, but its w4a16_gemv arguments do not write it}}
    schedule.w4a16_gemv "t" {writes = [@x], input = @x, outputs = [@y], weights = ["w"], n = [64], k = 64, group = 32}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @y {dtype = "f32", shape = array<i64: 64>}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x, @y]}
  }
  schedule.barrier
  schedule.phase "q" {
    // An atomic_f32 GEMV accumulates into its outputs: it does not write them.
    // expected-error @+1 {{lists @y in writes, but its w4a16_gemv arguments do not write it}}
    schedule.w4a16_gemv "t" {writes = [@y], input = @x, outputs = [@y], weights = ["w"], n = [64], k = 64, group = 32, epilogue = "atomic_f32"}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x]}
  }
  schedule.barrier
  schedule.phase "q" {
    // An argument no registry entry declares names a buffer only through
    // the access lists.
    // expected-error @+1 {{argument 'extra' names buffer @y, which the task does not list in reads, writes or accumulates}}
    schedule.opaque "t" {reads = [@x], args = {extra = "y"}}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{size 2147483648 exceeds the 65536 counters one array may have}}
  schedule.counter @c {size = 2147483648 : i64}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{count 16777216 exceeds the 1048576 instances a task may have}}
    schedule.opaque "t" {count = 16777216 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{attribute 'deal_offset' failed to satisfy constraint}}
  schedule.phase "p" attributes {deal_offset = -1 : i64} {
    schedule.opaque "t" {count = 8 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{bytes must be non-negative, got -5}}
    schedule.opaque "t" {count = 8 : i64, bytes = -5 : i64}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  // expected-error @+1 {{size exceeds 2^48 bytes}}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 4611686018427387904>}
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{count must be positive, got -2}}
    schedule.opaque "t" {count = -2 : i64}
  }
}

// -----

// A task's op is its kind (one of the TaskKind keywords); any other op name
// of the dialect is refused where it stands, with the list of kinds.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{custom op 'schedule.zero_f16' is no op of the schedule dialect; a task's op is its kind, one of: residual_rmsnorm, w4a16_gemv, bf16_rows, kda_head_chunk, conv_commit, zero_f32, final_residual, mla_rope_append, mla_q_absorb, mla_attention_chunk, mla_combine_wv, moe_gate_up, moe_down, gqa_rope_append, gqa_attention_chunk, gqa_combine, kda_gated_norm, argmax, opaque}}
    schedule.zero_f16 "t" {count = 1 : i64}
  }
}

// -----

// The hazard checks see the accesses a task's arguments say: the GEMV reads
// @x (its `input`) in the phase that writes it.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x]}
    // expected-error @+1 {{accesses @x after task 'w' without a barrier or counter between them}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [64], k = 64, group = 32}
  }
}

// -----

// What an access asks of the buffer it names: fp32 sums go into an f32
// buffer.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 16, 64>, group = 32 : i64}
  schedule.buffer @s {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @z {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.phase "q" {
    // expected-error @+1 {{accumulates into @s, a bf16 buffer: the sums it adds are fp32 (an f32 buffer)}}
    schedule.moe_down "d" {down = "w", sums = @z, acc = @s, hidden = 64 : i64, inter = 32 : i64, slots = 1 : i64, group = 32 : i64}
  }
}

// -----

// A GEMV writes one output per width in `n`, of that many elements, in
// bf16 unless it accumulates.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 32>}
  schedule.phase "p" {
    // expected-error @+1 {{output @y holds 32 elements, but its width in 'n' is 64}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [64], k = 64, group = 32, epilogue = "bf16"}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @y {dtype = "f32", shape = array<i64: 64>}
  schedule.phase "p" {
    // expected-error @+1 {{writes output @y in bf16 (epilogue 'bf16'), but the buffer is f32}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [64], k = 64, group = 32, epilogue = "bf16"}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    // expected-error @+1 {{has 1 outputs but 2 widths in 'n' (one per output)}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [32, 32], k = 64, group = 32, epilogue = "bf16"}
  }
}

// -----

schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @s {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    // expected-error @+1 {{zeroes @s, a bf16 buffer: only f32 buffers, and buffers a task stores for polling, are cleared as floats}}
    schedule.zero_f32 "zero" {buffer = @s, n = 64 : i64}
  }
}

// -----

// Only a moe_down task waits in its prologue (moe_down_task_waiting).
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "p" {writes = [@x]}
    schedule.signal @c {task = "p"}
  }
  schedule.phase "q" {
    schedule.opaque "q" {reads = [@x]}
    // expected-error @+1 {{in_prologue: task 'q' is a schedule.opaque, which has no form that waits in its prologue: its waits stay before it}}
    schedule.wait @c {task = "q", target = 1 : i64, in_prologue}
  }
}

// -----

// One prologue wait per task.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 1, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 1, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 1, 4, 256>}
  schedule.counter @a {size = 1 : i64}
  schedule.counter @b {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "p1" {writes = [@sums]}
    schedule.opaque "p2" {writes = [@acc]}
    schedule.signal @a {task = "p1"}
    schedule.signal @b {task = "p2"}
  }
  schedule.phase "down" {
    schedule.moe_down "d" {acc = @acc, down = "down", experts = 1 : i64, group = 32 : i64, hidden = 256 : i64, inter = 128 : i64, ksplit = 1 : i64, slots = 1 : i64, sums = @sums, tiles = 2 : i64, tn = 128 : i64, bytes = 16384 : i64, count = 2 : i64, partition = #schedule.partition<experts>}
    schedule.wait @a {divisor = 2 : i64, task = "d", target = 1 : i64, in_prologue}
    // expected-error @+1 {{in_prologue: task 'd' has a second prologue wait}}
    schedule.wait @b {divisor = 2 : i64, task = "d", target = 1 : i64, in_prologue}
  }
}

// -----

// A prologue wait guards only the staged sums: the down task's weights are
// chosen through the router's logits, whose wait stays before the task.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.counter @route.done {size = 1 : i64}
  schedule.counter @gu.ready {size = 2 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
  }
  schedule.barrier
  schedule.phase "route" {
    schedule.bf16_rows "route" {input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>}
    schedule.signal @route.done {divisor = 4 : i64, task = "route"}
  }
  schedule.phase "gate_up" {
    schedule.moe_gate_up "gu" {experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
    schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "gu"}
    schedule.signal @gu.ready {divisor = 32 : i64, task = "gu"}
  }
  schedule.phase "down" {
    schedule.moe_down "down" {acc = @acc, down = "down", experts = 8 : i64, group = 32 : i64, hidden = 256 : i64, inter = 128 : i64, ksplit = 4 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 16 : i64, tn = 16 : i64, top_k = 2 : i64, bytes = 49152 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
    // expected-error @+1 {{in_prologue: task 'down' reads @logits, which its signaller 'route' writes: only its staged @sums may be waited for in its prologue}}
    schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "down", in_prologue}
    schedule.wait @gu.ready {divisor = 32 : i64, target = 32 : i64, task = "down"}
  }
}

// -----

// expected-error @+1 {{'schedule.kernel' op packed_arithmetic must be "exact", "scaled" or "folded", got "int4"}}
schedule.kernel @k attributes {threads = 128 : i64, packed_arithmetic = "int4"} {
}

// -----

// expected-error @+1 {{'schedule.kernel' op tile_stages_ahead must be 0 (the whole ring) or at least 2, got -1}}
schedule.kernel @k attributes {threads = 128 : i64, tile_stages_ahead = -1 : i64} {
}

// -----

// expected-error @+1 {{'schedule.kernel' op tile_stages_ahead must be 0 (the whole ring) or at least 2, got 1}}
schedule.kernel @k attributes {threads = 128 : i64, tile_stages_ahead = 1 : i64} {
}

// -----

// An attention chunk's prologue wait guards only its absorbed queries: a
// signaller that also writes its rope queries must be waited for before it.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 32>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.counter @absorb.done {size = 1 : i64}
  schedule.phase "absorb" {
    schedule.opaque "absorb" {writes = [@q_abs, @q_rope]}
    schedule.signal @absorb.done {divisor = 1 : i64, task = "absorb"}
  }
  schedule.phase "attention" {
    schedule.mla_attention_chunk "attn" {c_kv = @state.0.c_kv, count = 64 : i64, head_group = 2 : i64, heads = 2 : i64, k_rope = @state.0.k_rope, lora = 128 : i64, max_chunks = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, rope = 16 : i64, scale = 0.14433756729740646 : f64}
    // expected-error @+1 {{in_prologue: task 'attn' reads @q_rope, which its signaller 'absorb' writes: only its staged @q_abs may be waited for in its prologue}}
    schedule.wait @absorb.done {divisor = 64 : i64, in_prologue, target = 1 : i64, task = "attn"}
  }
}

// -----

// A combine's prologue wait guards only the chunks' partials (all three):
// a signaller that also writes another buffer the combine reads must be
// waited for before it.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.buffer @scale {dtype = "f32", shape = array<i64: 2>}
  schedule.buffer @o {dtype = "f32", shape = array<i64: 64>}
  schedule.weight @kv_b.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 64, 128>}
  schedule.weight @kv_b.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.weight @kv_b.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.counter @attn.done {size = 1 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "o.zero" {buffer = @o, n = 64 : i64, bytes = 256 : i64, count = 1 : i64}
  }
  schedule.barrier
  schedule.phase "attention" {
    schedule.opaque "attn" {count = 4 : i64, writes = [@part_m, @part_l, @part_acc, @scale]}
    schedule.signal @attn.done {divisor = 4 : i64, task = "attn"}
  }
  schedule.phase "combine" {
    schedule.mla_combine_wv "combine" {bytes = 4096 : i64, count = 8 : i64, group = 32 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 128 : i64, nope = 32 : i64, o = @o, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<heads>, reads = [@scale], slices = 4 : i64, v_head = 32 : i64}
    // expected-error @+1 {{in_prologue: task 'combine' reads @scale, which its signaller 'attn' writes: only its staged @part_m, @part_l, @part_acc may be waited for in its prologue}}
    schedule.wait @attn.done {divisor = 8 : i64, in_prologue, target = 4 : i64, task = "combine"}
  }
}

// -----

// A GEMV of an input in shared memory has no staging to wait before.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 128, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 256>}
  schedule.counter @p.done {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "p" {writes = [@y]}
    schedule.signal @p.done {divisor = 1 : i64, task = "p"}
  }
  schedule.phase "after" {
    schedule.w4a16_gemv "proj" {epilogue = "bf16", group = 32 : i64, input = @x, input_offset = 0 : i64, k = 256 : i64, ksplit = 1 : i64, n = [256], outputs = [@y], tiles = 2 : i64, tn = 128 : i64, weights = ["proj"], bytes = 40960 : i64, count = 2 : i64, partition = #schedule.partition<cols>}
    // expected-error @+1 {{in_prologue: task 'proj' reads its input @x from shared memory: no staging to wait before}}
    schedule.wait @p.done {divisor = 2 : i64, in_prologue, target = 1 : i64, task = "proj"}
  }
}

// -----

// A gated norm input (schedule-fuse-kda-gated-norm) takes its four
// arguments together.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "q" {
    // expected-error @+1 {{a gated norm input takes gated_norm_gate, gated_norm_weight, gated_norm_eps and gated_norm_head_dim together}}
    schedule.w4a16_gemv "t" {input = @o, outputs = [@y], weights = ["w"], n = [64], k = 256, group = 32, gated_norm_gate = @g, gated_norm_head_dim = 128}
  }
}

// -----

// Each instance stages whole heads: k / ksplit a multiple of the head size.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "q" {
    // expected-error @+1 {{a gated norm input's k-slices must be whole heads of 128 values (k 256, slice 64)}}
    schedule.w4a16_gemv "t" {input = @o, outputs = [@y], weights = ["w"], n = [64], k = 256, group = 32, ksplit = 4, gated_norm_gate = @g, gated_norm_weight = "nw", gated_norm_eps = 1.0e-05, gated_norm_head_dim = 128}
  }
}

// -----

// ... from offset 0 (whole heads) ...
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 384>}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "q" {
    // expected-error @+1 {{a gated norm input is read from offset 0 (whole heads), not 128}}
    schedule.w4a16_gemv "t" {input = @o, input_offset = 128, outputs = [@y], weights = ["w"], n = [64], k = 256, group = 32, gated_norm_gate = @g, gated_norm_weight = "nw", gated_norm_eps = 1.0e-05, gated_norm_head_dim = 128}
  }
}

// -----

// ... for one weight.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @y2 {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "q" {
    // expected-error @+1 {{a gated norm input is staged for one weight, not 2}}
    schedule.w4a16_gemv "t" {input = @o, outputs = [@y, @y2], weights = ["w", "w2"], n = [64, 64], k = 256, group = 32, gated_norm_gate = @g, gated_norm_weight = "nw", gated_norm_eps = 1.0e-05, gated_norm_head_dim = 128}
  }
}

// -----

// ... its heads whole lane steps of 32 values.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 192>}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 192>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "q" {
    // expected-error @+1 {{a gated norm input's heads are staged 32 values per lane step: 48 is no multiple of 32}}
    schedule.w4a16_gemv "t" {input = @o, outputs = [@y], weights = ["w"], n = [64], k = 192, group = 32, gated_norm_gate = @g, gated_norm_weight = "nw", gated_norm_eps = 1.0e-05, gated_norm_head_dim = 48}
  }
}

// -----

// A GEMV staging a gated norm waits in its prologue for o and for the gate:
// a third prologue wait is refused.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 64>}
  schedule.weight @w.w_q {dtype = "u8", group = 128 : i64, shape = array<i64: 128, 64>}
  schedule.weight @w.scales {dtype = "bf16", group = 128 : i64, shape = array<i64: 2, 64>}
  schedule.weight @w.zeros {dtype = "bf16", group = 128 : i64, shape = array<i64: 2, 64>}
  schedule.counter @a {size = 1 : i64}
  schedule.counter @b {size = 1 : i64}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "p" {
    schedule.zero_f32 "z" {buffer = @acc, n = 64 : i64}
    schedule.opaque "p1" {writes = [@o]}
    schedule.opaque "p2" {writes = [@g]}
    schedule.opaque "p3" {writes = [@o]}
    schedule.signal @a {task = "p1"}
    schedule.signal @b {task = "p2"}
    schedule.signal @c {task = "p3"}
  }
  schedule.barrier
  schedule.phase "proj" {
    schedule.w4a16_gemv "t" {count = 2 : i64, epilogue = "atomic_f32", input = @o, input_offset = 0 : i64, outputs = [@acc], group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, n = [64], tn = 64 : i64, weights = ["w"], gated_norm_gate = @g, gated_norm_weight = "nw", gated_norm_eps = 1.0e-05, gated_norm_head_dim = 128}
    schedule.wait @a {divisor = 2 : i64, task = "t", target = 1 : i64, in_prologue}
    schedule.wait @b {divisor = 2 : i64, task = "t", target = 1 : i64, in_prologue}
    // expected-error @+1 {{in_prologue: task 't' has a third prologue wait (at most 2: a gated norm input's o and gate)}}
    schedule.wait @c {divisor = 2 : i64, task = "t", target = 1 : i64, in_prologue}
  }
}

// -----

// A combine stages three partial buffers, but waits in its prologue once.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.buffer @o {dtype = "f32", shape = array<i64: 64>}
  schedule.weight @kv_b.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 64, 128>}
  schedule.weight @kv_b.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.weight @kv_b.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.counter @a {size = 1 : i64}
  schedule.counter @b {size = 1 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "o.zero" {buffer = @o, n = 64 : i64}
  }
  schedule.barrier
  schedule.phase "attention" {
    schedule.opaque "attn" {count = 4 : i64, writes = [@part_m, @part_l]}
    schedule.opaque "attn2" {count = 4 : i64, writes = [@part_acc]}
    schedule.signal @a {divisor = 4 : i64, task = "attn"}
    schedule.signal @b {divisor = 4 : i64, task = "attn2"}
  }
  schedule.phase "combine" {
    schedule.mla_combine_wv "combine" {bytes = 4096 : i64, count = 8 : i64, group = 32 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 128 : i64, nope = 32 : i64, o = @o, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<heads>, slices = 4 : i64, v_head = 32 : i64}
    schedule.wait @a {divisor = 8 : i64, target = 4 : i64, task = "combine", in_prologue}
    // expected-error @+1 {{in_prologue: task 'combine' has a second prologue wait (at most 1)}}
    schedule.wait @b {divisor = 8 : i64, target = 4 : i64, task = "combine", in_prologue}
  }
}

// -----

// An argmax of the tiles (schedule-fuse-argmax) takes its two arguments
// together.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @next {dtype = "i32", shape = array<i64: 1>}
  schedule.phase "q" {
    // expected-error @+1 {{an argmax of the tiles takes argmax_output and argmax_scratch together}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [256], k = 256, group = 32, argmax_output = @next}
  }
}

// -----

// ... over the stored bf16 output, not atomic_f32 sums ...
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @next {dtype = "i32", shape = array<i64: 1>}
  schedule.buffer @scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.phase "q" {
    // expected-error @+1 {{an argmax of the tiles needs the stored (bf16) output, not the atomic_f32 sums}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [256], k = 256, group = 32, epilogue = "atomic_f32", argmax_output = @next, argmax_scratch = @scratch}
  }
}

// -----

// ... in whole tiles.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @next {dtype = "i32", shape = array<i64: 1>}
  schedule.buffer @scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.phase "q" {
    // expected-error @+1 {{an argmax of the tiles needs whole tiles (ksplit 1), not ksplit 2}}
    schedule.w4a16_gemv "t" {input = @x, outputs = [@y], weights = ["w"], n = [256], k = 256, group = 32, ksplit = 2, argmax_output = @next, argmax_scratch = @scratch}
  }
}

// -----

// ... one instance per tile.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @next {dtype = "i32", shape = array<i64: 1>}
  schedule.buffer @scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.phase "q" {
    // expected-error @+1 {{an argmax of the tiles needs one instance per tile: count 4, tiles 2}}
    schedule.w4a16_gemv "t" {count = 4 : i64, input = @x, outputs = [@y], weights = ["w"], n = [256], k = 256, group = 32, ksplit = 1, tiles = 2, tn = 128, argmax_output = @next, argmax_scratch = @scratch}
  }
}

// -----

// schedule-poll-router-logits: a routed task polling logits that no earlier
// task stores for polling (the router ordered by a barrier, but its stores
// plain) is refused; so is a polled read of logits that nothing clears
// (ordered) before the polled store; with the clearing, the polled read
// needs no barrier or counter after the store.

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
      schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
  }
  schedule.barrier
  schedule.phase "route" {
    schedule.bf16_rows "route" {input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>}
  }
  schedule.barrier
  schedule.phase "gate_up" {
    // expected-error @+1 {{polls @logits, which no task writes with a polled store}}
    schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
      schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
  }
  schedule.barrier
  schedule.phase "route" {
    schedule.bf16_rows "route" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>}
  }
  schedule.phase "gate_up" {
    // expected-error @+1 {{reads @logits before any task writes it}}
    schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
      schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
    schedule.zero_f32 "clear" {buffer = @logits, n = 4 : i64, bytes = 16 : i64, count = 1 : i64}
  }
  schedule.barrier
  schedule.phase "route" {
    schedule.bf16_rows "route" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>}
  }
  schedule.phase "gate_up" {
    schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 1, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 1, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 1, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 1, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 1, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 1, 8, 128>}
  schedule.phase "zero" {
    schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
  }
  schedule.barrier
  schedule.phase "shared" {
    // expected-error @+1 {{poll_logits on a task without router logits}}
    schedule.moe_gate_up "gu" {poll_logits, experts = 1 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, slots = 1 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, up = "up", bytes = 8192 : i64, count = 32 : i64, partition = #schedule.partition<experts>}
  }
}

// -----

// A plain write between the clearing and the polled store, or before a
// polled buffer's store without its clearing: refused.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @router2 {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.phase "zero" { schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    // expected-error @+1 {{writes @logits, which a task stores for polling: only its clearing (zero_f32) may}}
    schedule.bf16_rows "prev" {input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router2", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>} }
  schedule.barrier
  schedule.phase "route" { schedule.bf16_rows "route" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>} }
  schedule.phase "gu" { schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>} }
}

// -----

// Two polled stores of one buffer: refused (a reader could take the first's).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @router2 {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "zero" { schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    schedule.zero_f32 "clear" {buffer = @logits, n = 4 : i64, bytes = 16 : i64, count = 1 : i64} }
  schedule.barrier
  schedule.phase "route" { schedule.bf16_rows "route" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>}
    schedule.signal @c {divisor = 4 : i64, task = "route"} }
  // expected-error @+1 {{stores @logits for polling, as 'route' does: one polled store per buffer}}
  schedule.phase "route2" { schedule.bf16_rows "route2" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router2", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>}
    schedule.wait @c {divisor = 4 : i64, target = 4 : i64, task = "route2"} }
  schedule.phase "gu" { schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>} }
}

// -----

// A reader polling more logits than the store writes would wait forever.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @router2 {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.phase "zero" { schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
    schedule.zero_f32 "clear" {buffer = @logits, n = 4 : i64, bytes = 16 : i64, count = 1 : i64} }
  schedule.barrier
  schedule.phase "route" { schedule.bf16_rows "route" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 4 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 2 : i64, partition = #schedule.partition<rows>} }
  // expected-error @+1 {{polls 8 logits of @logits but 'route' stores 4 (it would wait forever)}}
  schedule.phase "gu" { schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>} }
}

// -----

// A clearing after the polled store would leave its readers waiting.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @router {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @gate.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @gate.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @gate.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 128, 128>}
  schedule.weight @up.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @up.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 8, 128>}
  schedule.weight @down.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 8, 64, 256>}
  schedule.weight @down.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @down.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 4, 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 256, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 16, 256>}
  schedule.weight @router2 {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.counter @c {size = 1 : i64}
  schedule.phase "zero" { schedule.zero_f32 "sums.zero" {buffer = @sums, n = 512 : i64, bytes = 2048 : i64, count = 1 : i64}
    schedule.zero_f32 "clear" {buffer = @logits, n = 4 : i64, bytes = 16 : i64, count = 1 : i64} }
  schedule.barrier
  schedule.phase "route" { schedule.bf16_rows "route" {polled_output, input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, rows_per_task = 2 : i64, weight = "router", bytes = 4096 : i64, count = 4 : i64, partition = #schedule.partition<rows>} }
  schedule.barrier
  // expected-error @+1 {{clears @logits, which 'route' stores for polling: the clearing must be ordered before the store}}
  schedule.phase "clear2" { schedule.zero_f32 "clear2" {buffer = @logits, n = 4 : i64, bytes = 16 : i64, count = 1 : i64}
    schedule.signal @c {divisor = 1 : i64, task = "clear2"}
  }
  schedule.phase "gu" { schedule.moe_gate_up "gu" {poll_logits, experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
    schedule.wait @c {divisor = 64 : i64, target = 1 : i64, task = "gu"}
  }
}

// -----

// An MLA attention task in one bf16 part needs 9-16 heads per task (up to
// 8, the lo parts ride in the mma's spare A rows).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 32>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.phase "attention" {
    // expected-error @+1 {{query_parts = 1 needs a head_group of 9 to 16 heads, got 2}}
    schedule.mla_attention_chunk "attn" {c_kv = @state.0.c_kv, count = 64 : i64, head_group = 2 : i64, heads = 2 : i64, k_rope = @state.0.k_rope, lora = 128 : i64, max_chunks = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, query_parts = 1 : i64, rope = 16 : i64, scale = 0.14433756729740646 : f64}
  }
}

// -----

// Its chunks' rows are a positive multiple of 16.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 32>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.phase "attention" {
    // expected-error @+1 {{chunk_rows must be a multiple of 16 in 16..4096, got 0}}
    schedule.mla_attention_chunk "attn" {c_kv = @state.0.c_kv, chunk_rows = 0 : i64, count = 64 : i64, head_group = 2 : i64, heads = 2 : i64, k_rope = @state.0.k_rope, lora = 128 : i64, max_chunks = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, rope = 16 : i64, scale = 0.14433756729740646 : f64}
  }
}

// -----

// Its head group divides its heads (and is at most the mma's 16 A rows).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 32>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.phase "attention" {
    // expected-error @+1 {{head_group must divide the 2 heads and be at most 16 (the mma's A rows), got 3}}
    schedule.mla_attention_chunk "attn" {c_kv = @state.0.c_kv, count = 64 : i64, head_group = 3 : i64, heads = 2 : i64, k_rope = @state.0.k_rope, lora = 128 : i64, max_chunks = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, rope = 16 : i64, scale = 0.14433756729740646 : f64}
  }
}

// -----

// The MLA partials' maxima and sums are fp32; their partial sums fp32 or
// bf16 (schedule-form-phases mla-partials).
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 32>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @part_m {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "bf16", shape = array<i64: 16384>}
  schedule.phase "attention" {
    // expected-error @+1 {{'part_m' is @part_m of dtype bf16: the MLA partials' maxima and sums are f32}}
    schedule.mla_attention_chunk "attn" {c_kv = @state.0.c_kv, count = 64 : i64, head_group = 2 : i64, heads = 2 : i64, k_rope = @state.0.k_rope, lora = 128 : i64, max_chunks = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, rope = 16 : i64, scale = 0.14433756729740646 : f64}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @kv_b.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 64, 128>}
  schedule.weight @kv_b.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.weight @kv_b.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "i32", shape = array<i64: 16384>}
  schedule.buffer @o {dtype = "f32", shape = array<i64: 64>}
  schedule.phase "combine" {
    // expected-error @+1 {{'part_acc' is @part_acc of dtype i32: the MLA partials' sums are f32 or bf16}}
    schedule.mla_combine_wv "combine" {count = 8 : i64, group = 32 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 128 : i64, nope = 32 : i64, o = @o, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<heads>, slices = 4 : i64, v_head = 32 : i64}
  }
}

// -----

// l2_routed_tasks (schedule-prefetch-weights routed-tasks-l2) names a
// phase's routed MoE down tiles; the shared expert's (no logits) are not.
schedule.kernel @k attributes {threads = 128 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 1, 16, 64>, group = 32 : i64}
  schedule.buffer @s {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z {dtype = "f32", shape = array<i64: 64>}
  schedule.phase "zero" {
    schedule.zero_f32 "z0" {writes = [@s], buffer = @s, n = 64 : i64}
    schedule.zero_f32 "z1" {writes = [@z], buffer = @z, n = 64 : i64}
  }
  schedule.barrier
  // expected-error @+1 {{'schedule.phase' op l2_routed_tasks on a phase with no routed moe_down task (one that names its router's logits)}}
  schedule.phase "q" attributes {l2_routed_tasks} {
    schedule.moe_down "d" {reads = [@z], accumulates = [@s], down = "w", sums = @z, acc = @s, hidden = 64 : i64, inter = 32 : i64, slots = 1 : i64, group = 32 : i64}
  }
}
