// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=phase-budget=false" | FileCheck %s
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=target-sms=4 phase-budget=false" | FileCheck %s --check-prefix=SMS4
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=target-sms=16 phase-budget=false" | FileCheck %s --check-prefix=SMS16
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=target-sms=32 phase-budget=false" | FileCheck %s --check-prefix=SMS32
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=target-sms=16 full-segment-bytes=128 phase-budget=false" | FileCheck %s --check-prefix=FSB
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=attention-chunks=16" | FileCheck %s --check-prefix=CHUNKS
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=attention-head-group=8" | FileCheck %s --check-prefix=HG8
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=attention-head-group=12" | FileCheck %s --check-prefix=HG12
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=attention-head-group=8 attention-sub-rows=32" | FileCheck %s --check-prefix=SUB32
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-sub-rows=24" 2>&1 | FileCheck %s --check-prefix=BAD-SUB24
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-sub-rows=32" 2>&1 | FileCheck %s --check-prefix=BAD-SUB32-HG16
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-partition-work=attention-query-parts=2 attention-chunk-rows=16" | FileCheck %s --check-prefix=TWO
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-query-parts=3" 2>&1 | FileCheck %s --check-prefix=BAD-PARTS3
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-chunk-rows=24" 2>&1 | FileCheck %s --check-prefix=BAD-CROWS24
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-chunk-rows=8192" 2>&1 | FileCheck %s --check-prefix=BAD-CROWS8192
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-head-group=17" 2>&1 | FileCheck %s --check-prefix=BAD-HG17
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-head-group=0" 2>&1 | FileCheck %s --check-prefix=BAD-HG0
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=target-sms=0" 2>&1 | FileCheck %s --check-prefix=BAD-SMS0
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=target-sms=1025" 2>&1 | FileCheck %s --check-prefix=BAD-SMS1025
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=task-overhead-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BAD-OVERHEAD
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=attention-chunks=-1" 2>&1 | FileCheck %s --check-prefix=BAD-CHUNKS
// RUN: not mk-opt %s -split-input-file "--schedule-partition-work=full-segment-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BAD-SEGMENT

// schedule-partition-work on hand-written tasks: for each task the pass lists
// the legal cuts and keeps the one with the lowest estimated time on
// `target-sms` SMs (264 by default): ceil(count / target-sms) waves of (bytes
// per task + task-overhead-bytes, 24576 by default). It sets `count`, `bytes`
// (all instances together), `partition` when unset, the tile sizes in `args`,
// and `grain` / `grain_per` (/ `grain_span`) for counter placement. A W4A16
// tile of width tn over k rows streams k*tn/2 bytes of w_q plus its scales
// and zeros. The cases: GEMV tile width and split-K as target-sms grows,
// split-K aligned with the producer's units, grouped GEMVs cut by unit,
// bf16 rows, MoE experts, MLA attention chunks (which resize the partials),
// the fixed cuts of the small kinds, and the errors.
//
// BAD-SMS0: schedule-partition-work: target-sms must be in 1..1024 (blocks the grid runs at once), got 0
// BAD-SMS1025: schedule-partition-work: target-sms must be in 1..1024 (blocks the grid runs at once), got 1025
// BAD-OVERHEAD: schedule-partition-work: task-overhead-bytes must be in 0..1099511627776, got -1
// BAD-CHUNKS: schedule-partition-work: attention-chunks must be in 0..1024 (at most one per block; 0: the default), got -1
// BAD-SEGMENT: schedule-partition-work: full-segment-bytes must be >= 0 (0: no penalty), got -1
// BAD-HG17: schedule-partition-work: attention-head-group must be in 1..16 (the mma's A rows), got 17
// BAD-HG0: schedule-partition-work: attention-head-group must be in 1..16 (the mma's A rows), got 0
// BAD-SUB24: schedule-partition-work: attention-sub-rows must be 16 or 32, got 24
// BAD-SUB32-HG16: 'schedule.mla_attention_chunk' op attention-sub-rows=32 needs at most 8 heads per task, got 16
// BAD-PARTS3: schedule-partition-work: attention-query-parts must be 1 or 2, got 3
// BAD-CROWS24: schedule-partition-work: attention-chunk-rows must be a multiple of 16 in 16..4096, got 24
// BAD-CROWS8192: schedule-partition-work: attention-chunk-rows must be a multiple of 16 in 16..4096, got 8192

// GEMV tile width: 1024 x 1024 in groups of 128 is 8 tiles of 128 columns
// (68 KB each) or 64 tiles of 16 (8.5 KB). The more SMs, the more and
// narrower the tiles: 128 wide on 4 SMs (2 waves), 64 on 16, 32 on 32, 16
// on 264 (one wave of 64). The total bytes stay those of the weight. With
// full-segment-bytes=128, 64-byte rows cost double: on 16 SMs a 64-wide
// tile then costs what a 128-wide one does, and on equal estimates the
// wider tile wins.
// CHECK-LABEL: schedule.kernel @width attributes {target_sms = 264 : i64
// CHECK: schedule.w4a16_gemv "proj" {{{.*}}bytes = 557056 : i64{{.*}}count = 64 : i64{{.*}}ksplit = 1 : i64{{.*}}partition = #schedule.partition<cols>{{.*}}tiles = 64 : i64{{.*}}tn = 16 : i64
// SMS4: schedule.kernel @width attributes {target_sms = 4 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "proj" {{{.*}}bytes = 557056 : i64{{.*}}count = 8 : i64{{.*}}tiles = 8 : i64{{.*}}tn = 128 : i64
// SMS16: schedule.{{[a-z0-9_]+}} "proj" {{{.*}}bytes = 557056 : i64{{.*}}count = 16 : i64{{.*}}tiles = 16 : i64{{.*}}tn = 64 : i64
// SMS32: schedule.{{[a-z0-9_]+}} "proj" {{{.*}}bytes = 557056 : i64{{.*}}count = 32 : i64{{.*}}tiles = 32 : i64{{.*}}tn = 32 : i64
// FSB: schedule.{{[a-z0-9_]+}} "proj" {{{.*}}bytes = 557056 : i64{{.*}}count = 8 : i64{{.*}}tiles = 8 : i64{{.*}}tn = 128 : i64
schedule.kernel @width attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 512, 1024>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 1024>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 1024>}
  schedule.phase "p" {
    schedule.w4a16_gemv "proj" {reads = [@x], writes = [@y], epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["w"]}
  }
}

// -----

// Split-K: only a GEMV whose sums are accumulated (atomic_f32) is cut along
// K, in slices of whole groups (at most 4096 / 128 = 32), more of them the
// more SMs there are; the same shape stored as bf16 is only cut by columns.
// CHECK-LABEL: schedule.kernel @splitk
// CHECK: schedule.w4a16_gemv "sum" {{{.*}}count = 256 : i64{{.*}}ksplit = 32 : i64{{.*}}partition = #schedule.partition<split_k>{{.*}}tiles = 8 : i64{{.*}}tn = 32 : i64
// CHECK: schedule.w4a16_gemv "store" {{{.*}}count = 16 : i64{{.*}}ksplit = 1 : i64{{.*}}partition = #schedule.partition<cols>{{.*}}tiles = 16 : i64{{.*}}tn = 16 : i64
// SMS4: schedule.w4a16_gemv "sum" {{{.*}}count = 4 : i64{{.*}}ksplit = 2 : i64{{.*}}partition = #schedule.partition<split_k>{{.*}}tiles = 2 : i64{{.*}}tn = 128 : i64
// SMS4: schedule.w4a16_gemv "store" {{{.*}}count = 4 : i64{{.*}}ksplit = 1 : i64{{.*}}partition = #schedule.partition<cols>{{.*}}tiles = 4 : i64{{.*}}tn = 64 : i64
// SMS16: schedule.{{[a-z0-9_]+}} "sum" {{{.*}}count = 16 : i64{{.*}}ksplit = 8 : i64{{.*}}tiles = 2 : i64{{.*}}tn = 128 : i64
// SMS32: schedule.{{[a-z0-9_]+}} "sum" {{{.*}}count = 32 : i64{{.*}}ksplit = 16 : i64{{.*}}tiles = 2 : i64{{.*}}tn = 128 : i64
schedule.kernel @splitk attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 2048, 256>, group = 128 : i64}
  schedule.weight @v.w_q {dtype = "u8", shape = array<i64: 2048, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "proj" {
    schedule.w4a16_gemv "sum" {reads = [@x], accumulates = [@acc], epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 4096 : i64, n = [256], outputs = [@acc], weights = ["w"]}
    schedule.w4a16_gemv "store" {reads = [@x], writes = [@y], epilogue = "bf16", group = 128 : i64, input = @x, k = 4096 : i64, n = [256], outputs = [@y], weights = ["v"]}
  }
}

// -----

// Split-K by the producer's units: the input of o_proj is written by a task
// with `unit = "head"` over 4 heads, so its slices are whole heads (ksplit
// divides 4) and it gets the head grain: instance j waits for grain_span
// heads from head (j / grain_per) * grain_span. The KDA task itself is cut
// into state column chunks (chunk), grain_per of them per head. The same
// o_proj reading an input no task of its kernel produces has no grain, and
// its slices only follow the groups of 16 rows (ksplit 8 on 264 SMs).
// CHECK-LABEL: schedule.kernel @heads
// CHECK: schedule.kda_head_chunk "kda" {{{.*}}S = @S{{.*}}beta = @beta{{.*}}chunk = 16 : i64{{.*}}ck = @ck{{.*}}conv = 4 : i64{{.*}}conv_w = "conv_w"{{.*}}count = 8 : i64{{.*}}cq = @cq{{.*}}cv = @cv{{.*}}g = @g{{.*}}grain = "head"{{.*}}grain_per = 2 : i64{{.*}}partition = #schedule.partition<heads>
// CHECK: schedule.{{[a-z0-9_]+}} "o_proj" {{{.*}}accumulates = [@acc]{{.*}}count = 64 : i64{{.*}}epilogue = "atomic_f32"{{.*}}grain = "head"{{.*}}grain_per = 16 : i64{{.*}}grain_span = 1 : i64{{.*}}ksplit = 4 : i64{{.*}}partition = #schedule.partition<split_k>{{.*}}tiles = 16 : i64{{.*}}tn = 16 : i64
// CHECK-LABEL: schedule.kernel @no_unit
// CHECK: schedule.{{[a-z0-9_]+}} "o_proj" {{{.*}}accumulates = [@acc]{{.*}}count = 128 : i64{{.*}}epilogue = "atomic_f32"{{.*}}group = 16 : i64{{.*}}ksplit = 8 : i64{{.*}}tiles = 16 : i64{{.*}}tn = 16 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "kda" {{{.*}}S = @S{{.*}}beta = @beta{{.*}}chunk = 32 : i64{{.*}}ck = @ck{{.*}}conv = 4 : i64{{.*}}conv_w = "conv_w"{{.*}}count = 4 : i64{{.*}}cq = @cq{{.*}}cv = @cv{{.*}}g = @g{{.*}}grain = "head"{{.*}}grain_per = 1 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "o_proj" {{{.*}}accumulates = [@acc]{{.*}}count = 4 : i64{{.*}}epilogue = "atomic_f32"{{.*}}grain = "head"{{.*}}grain_per = 2 : i64{{.*}}grain_span = 2 : i64{{.*}}ksplit = 2 : i64{{.*}}tiles = 2 : i64{{.*}}tn = 128 : i64
schedule.kernel @heads attributes {threads = 256 : i64} {
  schedule.weight @conv_w {dtype = "bf16", shape = array<i64: 384, 4>}
  schedule.weight @wo.w_q {dtype = "u8", shape = array<i64: 64, 256>, group = 16 : i64}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @v {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 4>, space = "io"}
  schedule.buffer @S {dtype = "f32", shape = array<i64: 4096>, space = "state"}
  schedule.buffer @cq {dtype = "bf16", shape = array<i64: 384>, space = "state"}
  schedule.buffer @ck {dtype = "bf16", shape = array<i64: 384>, space = "state"}
  schedule.buffer @cv {dtype = "bf16", shape = array<i64: 384>, space = "state"}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "attn" {
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
    schedule.kda_head_chunk "kda" {reads = [@q, @k, @v, @g, @beta, @cq, @ck, @cv, @S], writes = [@S, @o], S = @S, beta = @beta, ck = @ck, conv = 4 : i64, conv_w = "conv_w", cq = @cq, cv = @cv, g = @g, head_dim = 32 : i64, heads = 4 : i64, k = @k, o = @o, q = @q, unit = "head", v = @v}
  }
  schedule.barrier
  schedule.phase "out" {
    schedule.w4a16_gemv "o_proj" {reads = [@o], accumulates = [@acc], epilogue = "atomic_f32", group = 16 : i64, input = @o, k = 128 : i64, n = [256], outputs = [@acc], weights = ["wo"]}
  }
}
schedule.kernel @no_unit attributes {threads = 256 : i64} {
  schedule.weight @wo.w_q {dtype = "u8", shape = array<i64: 64, 256>, group = 16 : i64}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "out" {
    schedule.w4a16_gemv "o_proj" {reads = [@o], accumulates = [@acc], epilogue = "atomic_f32", group = 16 : i64, input = @o, k = 128 : i64, n = [256], outputs = [@acc], weights = ["wo"]}
  }
}

// -----

// A grouped GEMV cut by unit (unit_cols = 32: 32 columns of each of its 2
// outputs per head): tiles are at most 32 wide, and grain_per is the tiles
// of one head over both outputs (2 x 32 / tn).
// CHECK-LABEL: schedule.kernel @grouped
// CHECK: schedule.{{[a-z0-9_]+}} "qk" {{{.*}}count = 8 : i64{{.*}}epilogue = "bf16"{{.*}}grain = "head"{{.*}}grain_per = 4 : i64{{.*}}tiles = 8 : i64{{.*}}tn = 16 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "qk" {{{.*}}count = 4 : i64{{.*}}epilogue = "bf16"{{.*}}grain = "head"{{.*}}grain_per = 2 : i64{{.*}}tiles = 4 : i64{{.*}}tn = 32 : i64
schedule.kernel @grouped attributes {threads = 256 : i64} {
  schedule.weight @norm_w {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @wq.w_q {dtype = "u8", shape = array<i64: 128, 64>, group = 32 : i64}
  schedule.weight @wk.w_q {dtype = "u8", shape = array<i64: 128, 64>, group = 32 : i64}
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@h], writes = [@x], base = @h, dim = 256 : i64, eps = 1.0e-06 : f64, weight = "norm_w", xs = @x}
    schedule.w4a16_gemv "qk" {reads = [@x], writes = [@q, @k], epilogue = "bf16", group = 32 : i64, input = @x, k = 256 : i64, n = [64, 64], outputs = [@q, @k], unit = "head", unit_cols = 32 : i64, weights = ["wq", "wk"]}
  }
}

// -----

// bf16 rows: rows_per_task is the power of two that balances best (one row
// per task on 264 SMs, two on 4); with a unit, one row per task and unit.
// CHECK-LABEL: schedule.kernel @rows
// CHECK: schedule.bf16_rows "router" {{{.*}}bytes = 4096 : i64{{.*}}count = 8 : i64{{.*}}partition = #schedule.partition<rows>{{.*}}rows_per_task = 1 : i64
// CHECK: schedule.{{[a-z0-9_]+}} "beta" {{{.*}}count = 8 : i64{{.*}}grain = "head"{{.*}}grain_per = 1 : i64{{.*}}rows_per_task = 1 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "router" {{{.*}}bytes = 4096 : i64{{.*}}count = 4 : i64{{.*}}rows_per_task = 2 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "beta" {{{.*}}count = 8 : i64{{.*}}grain = "head"{{.*}}grain_per = 1 : i64{{.*}}rows_per_task = 1 : i64
schedule.kernel @rows attributes {threads = 256 : i64} {
  schedule.weight @wr {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.weight @wb {dtype = "bf16", shape = array<i64: 8, 256>}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 8>}
  schedule.phase "p" {
    schedule.bf16_rows "router" {reads = [@x], writes = [@logits], input = @x, k = 256 : i64, output = @logits, rows = 8 : i64, weight = "wr"}
    schedule.bf16_rows "beta" {reads = [@x], writes = [@beta], input = @x, k = 256 : i64, output = @beta, rows = 8 : i64, unit = "head", weight = "wb"}
  }
}

// -----

// MoE experts: per slot, gate and up (2 x tiles x ksplit instances) and down
// (tiles x ksplit), split-K in slices of whole 16-row steps; grain_per is a
// slot's instances.
// CHECK-LABEL: schedule.kernel @moe
// CHECK: schedule.moe_gate_up "gate_up" {{{.*}}count = 256 : i64{{.*}}grain = "slot"{{.*}}grain_per = 128 : i64{{.*}}ksplit = 8 : i64{{.*}}partition = #schedule.partition<experts>{{.*}}tiles = 8 : i64{{.*}}tn = 16 : i64
// CHECK: schedule.moe_down "down" {{{.*}}count = 256 : i64{{.*}}grain = "slot"{{.*}}grain_per = 128 : i64{{.*}}ksplit = 8 : i64{{.*}}partition = #schedule.partition<experts>{{.*}}tiles = 16 : i64{{.*}}tn = 16 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "gate_up" {{{.*}}count = 4 : i64{{.*}}grain = "slot"{{.*}}grain_per = 2 : i64{{.*}}ksplit = 1 : i64{{.*}}tiles = 1 : i64{{.*}}tn = 128 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "down" {{{.*}}count = 4 : i64{{.*}}grain = "slot"{{.*}}grain_per = 2 : i64{{.*}}ksplit = 1 : i64{{.*}}tiles = 2 : i64{{.*}}tn = 128 : i64
schedule.kernel @moe attributes {threads = 256 : i64} {
  schedule.weight @norm_w {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @gate.w_q {dtype = "u8", shape = array<i64: 8, 128, 128>, group = 32 : i64}
  schedule.weight @up.w_q {dtype = "u8", shape = array<i64: 8, 128, 128>, group = 32 : i64}
  schedule.weight @down.w_q {dtype = "u8", shape = array<i64: 8, 64, 256>, group = 32 : i64}
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>, space = "io"}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "zero" {
    schedule.zero_f32 "sums.zero" {writes = [@sums], buffer = @sums, n = 512 : i64}
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "gate_up" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@h], writes = [@x], base = @h, dim = 256 : i64, eps = 1.0e-06 : f64, weight = "norm_w", xs = @x}
    schedule.moe_gate_up "gate_up" {reads = [@x, @logits], accumulates = [@sums], experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, top_k = 2 : i64, unit = "slot", up = "up"}
  }
  schedule.barrier
  schedule.phase "down" {
    schedule.moe_down "down" {reads = [@sums, @logits], accumulates = [@acc], acc = @acc, down = "down", experts = 8 : i64, group = 32 : i64, hidden = 256 : i64, inter = 128 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, top_k = 2 : i64, unit = "slot"}
  }
}

// -----

// A MoE down task stages at most 4096 rows of its input in shared memory:
// an expert 8192 wide is cut into split-K slices even where one slice per
// tile would fill the blocks (4 SMs: 4 tiles x 2 slices, not 4 x 1).
// CHECK-LABEL: schedule.kernel @wide_down
// CHECK: schedule.moe_down "down" {{{.*}}ksplit = {{[2-9]|1[0-9]}} : i64
// SMS4-LABEL: schedule.kernel @wide_down
// SMS4: schedule.{{[a-z0-9_]+}} "down" {{{.*}}count = 8 : i64{{.*}}ksplit = 2 : i64{{.*}}tiles = 4 : i64{{.*}}tn = 128 : i64
schedule.kernel @wide_down attributes {threads = 256 : i64} {
  schedule.weight @down.w_q {dtype = "u8", shape = array<i64: 1, 4096, 512>, group = 32 : i64}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 16384>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 512>}
  schedule.phase "zero" {
    schedule.zero_f32 "sums.zero" {writes = [@sums], buffer = @sums, n = 16384 : i64}
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 512 : i64}
  }
  schedule.barrier
  schedule.phase "down" {
    schedule.moe_down "down" {reads = [@sums], accumulates = [@acc], acc = @acc, down = "down", experts = 1 : i64, group = 32 : i64, hidden = 512 : i64, inter = 8192 : i64, slots = 1 : i64, sums = @sums, unit = "slot"}
  }
}

// -----

// MLA: attention runs one task per (chunk, group of up to
// attention-head-group heads: 16 by default; the largest divisor of the
// heads up to it, so 12 gives 8 of the 16 here), chunks from
// attention-chunks (0 by default: as many as fill target-sms once with the
// groups' tasks, a power of two up to 128: 128 here with one group of 16
// on 264 blocks, 128 with two of 8, 32 on 32 blocks, 16 on 16), and the
// partials are resized to one row per chunk and head (part_m, part_l:
// chunks x 16; part_acc: chunks x 16 x 64). Tasks of 16 heads carry their
// queries and probabilities in one bf16 part (query_parts = 1, the
// default attention-query-parts; tasks of 8 keep two, unsaid), and a chunk
// takes at least 32 rows (chunk_rows, attention-chunk-rows; 2 and 16, the
// template's defaults, are unsaid). The combine cuts each head into as
// many latent slices (of whole 16-row steps) as fit one wave: 4 on 264
// SMs, 2 on 32, 1 on 16.
// The query absorption is one task per head here (64 latent rows fit one).
// CHECK-LABEL: schedule.kernel @mla
// CHECK: schedule.buffer @part_m {dtype = "f32", shape = array<i64: 2048>}
// CHECK: schedule.buffer @part_l {dtype = "f32", shape = array<i64: 2048>}
// CHECK: schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 131072>}
// CHECK: schedule.mla_q_absorb "absorb" {{{.*}}bytes = 16384 : i64{{.*}}count = 16 : i64{{.*}}partition = #schedule.partition<heads>
// CHECK: schedule.mla_attention_chunk "attention" {{{.*}}c_kv = @c_kv, chunk_rows = 32 : i64, count = 128 : i64{{.*}}head_group = 16 : i64{{.*}}max_chunks = 128 : i64{{.*}}partition = #schedule.partition<chunks>{{.*}}query_parts = 1 : i64
// CHECK: schedule.mla_combine_wv "combine" {{{.*}}count = 64 : i64{{.*}}grain = "mla_head"{{.*}}grain_per = 4 : i64{{.*}}partition = #schedule.partition<heads>{{.*}}slices = 4 : i64
// SMS16: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}count = 16 : i64{{.*}}max_chunks = 16 : i64
// SMS16: schedule.{{[a-z0-9_]+}} "combine" {{{.*}}count = 16 : i64{{.*}}grain_per = 1 : i64{{.*}}slices = 1 : i64
// SMS32: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}count = 32 : i64{{.*}}max_chunks = 32 : i64
// SMS32: schedule.{{[a-z0-9_]+}} "combine" {{{.*}}count = 32 : i64{{.*}}grain_per = 2 : i64{{.*}}slices = 2 : i64
// HG8: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}c_kv = @c_kv, chunk_rows = 32 : i64, count = 256 : i64{{.*}}head_group = 8 : i64{{.*}}max_chunks = 128 : i64{{.*}}partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, reads
// HG12: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}c_kv = @c_kv, chunk_rows = 32 : i64, count = 256 : i64{{.*}}head_group = 8 : i64{{.*}}max_chunks = 128 : i64{{.*}}partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, reads
// TWO: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}c_kv = @c_kv, count = 128 : i64{{.*}}head_group = 16 : i64{{.*}}max_chunks = 128 : i64{{.*}}partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, reads
// 32-row sub-chunks: the attention task says so (sub_rows; 16, the
// default, is not written).
// CHECK-NOT: sub_rows
// SUB32: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}c_kv = @c_kv{{.*}}count = 256 : i64{{.*}}head_group = 8 : i64{{.*}}max_chunks = 128 : i64{{.*}}partition = #schedule.partition<chunks>{{.*}}sub_rows = 32 : i64
// CHUNKS: schedule.buffer @part_m {dtype = "f32", shape = array<i64: 256>}
// CHUNKS: schedule.buffer @part_l {dtype = "f32", shape = array<i64: 256>}
// CHUNKS: schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
// CHUNKS: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}c_kv = @c_kv{{.*}}count = 16 : i64{{.*}}head_group = 16 : i64{{.*}}max_chunks = 16 : i64
schedule.kernel @mla attributes {threads = 256 : i64} {
  schedule.weight @kv_b.w_q {dtype = "u8", shape = array<i64: 32, 1024>, group = 32 : i64}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 512>, space = "io"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @c_kv {dtype = "bf16", shape = array<i64: 4096>, space = "state"}
  schedule.buffer @k_rope {dtype = "bf16", shape = array<i64: 1024>, space = "state"}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 1024>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 16>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 16>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 1024>}
  schedule.buffer @o {dtype = "f32", shape = array<i64: 512>}
  schedule.phase "absorb" {
    schedule.zero_f32 "o.zero" {writes = [@o], buffer = @o, n = 512 : i64}
    schedule.mla_q_absorb "absorb" {reads = [@q], writes = [@q_abs], rope = 16 : i64, heads = 16 : i64, kv_b = "kv_b", lora = 64 : i64, nope = 32 : i64, q = @q, q_abs = @q_abs, v_head = 32 : i64}
  }
  schedule.barrier
  schedule.phase "attention" {
    schedule.mla_attention_chunk "attention" {reads = [@q_abs, @q_rope, @c_kv, @k_rope], writes = [@part_m, @part_l, @part_acc], rope = 16 : i64, c_kv = @c_kv, heads = 16 : i64, k_rope = @k_rope, lora = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, q_abs = @q_abs, q_rope = @q_rope, scale = 1.250000e-01 : f64}
  }
  schedule.barrier
  schedule.phase "combine" {
    schedule.mla_combine_wv "combine" {reads = [@part_m, @part_l, @part_acc], accumulates = [@o], nope = 32 : i64, group = 32 : i64, heads = 16 : i64, kv_b = "kv_b", lora = 64 : i64, o = @o, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, unit = "mla_head", v_head = 32 : i64}
  }
}

// -----

// GQA: the append is one warp per q or kv head (4 + 2 heads on 8 warps:
// one task); the attention one task per (chunk, kv head), chunks from
// attention-chunks, its partials resized to one row per chunk and query
// head (part_m, part_l: 64 x 4; part_acc: 64 x 4 x 64); one combine per
// query head (it merges as many chunks as the attention task has).
// CHECK-LABEL: schedule.kernel @gqa
// CHECK: schedule.buffer @part_m {dtype = "f32", shape = array<i64: 256>}
// CHECK: schedule.buffer @part_l {dtype = "f32", shape = array<i64: 256>}
// CHECK: schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
// CHECK: schedule.gqa_rope_append "append" {{{.*}}bytes = 3072 : i64{{.*}}partition = #schedule.partition<heads>
// CHECK: schedule.gqa_attention_chunk "attention" {{{.*}}count = 128 : i64{{.*}}max_chunks = 64 : i64{{.*}}partition = #schedule.partition<chunks>
// CHECK: schedule.gqa_combine "combine" {{{.*}}count = 4 : i64{{.*}}heads_per_task = 1 : i64{{.*}}partition = #schedule.partition<heads>
// CHUNKS-LABEL: schedule.kernel @gqa
// CHUNKS: schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 4096>}
// CHUNKS: schedule.{{[a-z0-9_]+}} "attention" {{{.*}}count = 32 : i64{{.*}}max_chunks = 16 : i64
schedule.kernel @gqa attributes {threads = 256 : i64} {
  schedule.weight @q_norm {dtype = "bf16", shape = array<i64: 64>}
  schedule.weight @k_norm {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @v {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @q_rot {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @k_cache {dtype = "bf16", shape = array<i64: -1, 2, 64>, space = "state"}
  schedule.buffer @v_cache {dtype = "bf16", shape = array<i64: -1, 2, 64>, space = "state"}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "append" {
    schedule.gqa_rope_append "append" {eps = 1.0e-06 : f64, head_dim = 64 : i64, heads = 4 : i64, k = @k, k_cache = @k_cache, k_norm = "k_norm", kv_heads = 2 : i64, q = @q, q_norm = "q_norm", q_out = @q_rot, theta = 1.0e+06 : f64, v = @v, v_cache = @v_cache}
  }
  schedule.barrier
  schedule.phase "attention" {
    schedule.gqa_attention_chunk "attention" {head_dim = 64 : i64, heads = 4 : i64, k_cache = @k_cache, kv_heads = 2 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, q = @q_rot, v_cache = @v_cache}
  }
  schedule.barrier
  schedule.phase "combine" {
    schedule.gqa_combine "combine" {head_dim = 64 : i64, heads = 4 : i64, o = @o, part_acc = @part_acc, part_l = @part_l, part_m = @part_m}
  }
}

// -----

// A head_dim the GQA templates' lane layout cannot take.
schedule.kernel @gqa_hd attributes {threads = 256 : i64} {
  schedule.buffer @q_rot {dtype = "bf16", shape = array<i64: 384>, space = "io"}
  schedule.buffer @k_cache {dtype = "bf16", shape = array<i64: -1, 2, 96>, space = "state"}
  schedule.buffer @v_cache {dtype = "bf16", shape = array<i64: -1, 2, 96>, space = "state"}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 384>}
  schedule.phase "attention" {
    // expected-error @+1 {{head_dim 96 has no GQA template: it must be a multiple of 64, at most 256 (a lane holds head_dim / 32 elements)}}
    schedule.gqa_attention_chunk "attention" {head_dim = 96 : i64, heads = 4 : i64, k_cache = @k_cache, kv_heads = 2 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, q = @q_rot, v_cache = @v_cache}
  }
}

// -----

// Fixed cuts, whatever target-sms: an every_block task stays one instance
// (its bytes: dim bf16 values), a zeroing task one instance of n f32, a
// short-conv commit one per 512 channels, RoPE append 16 row tasks, the
// final residual 4 slices.
// CHECK-LABEL: schedule.kernel @fixed
// CHECK: schedule.residual_rmsnorm "norm" {{{.*}}bytes = 512 : i64{{.*}}partition = #schedule.partition<every_block>
// CHECK: schedule.zero_f32 "acc.zero" {{{.*}}bytes = 1024 : i64{{.*}}partition = #schedule.partition<slices>
// CHECK: schedule.conv_commit "commit" {{{.*}}bytes = 196608 : i64{{.*}}count = 8 : i64{{.*}}partition = #schedule.partition<channels>
// CHECK: schedule.mla_rope_append "rope" {{{.*}}bytes = 512 : i64{{.*}}count = 16 : i64{{.*}}partition = #schedule.partition<rows>
// CHECK: schedule.final_residual "final" {{{.*}}bytes = 2048 : i64{{.*}}count = 4 : i64{{.*}}partition = #schedule.partition<slices>
// SMS4: schedule.{{[a-z0-9_]+}} "commit" {{{.*}}bytes = 196608 : i64{{.*}}count = 8 : i64
// SMS4: schedule.{{[a-z0-9_]+}} "final" {{{.*}}bytes = 2048 : i64{{.*}}count = 4 : i64
schedule.kernel @fixed attributes {threads = 256 : i64} {
  schedule.weight @norm_w {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @out {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @v {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @cq {dtype = "bf16", shape = array<i64: 12288>, space = "state"}
  schedule.buffer @ck {dtype = "bf16", shape = array<i64: 12288>, space = "state"}
  schedule.buffer @cv {dtype = "bf16", shape = array<i64: 12288>, space = "state"}
  schedule.buffer @mq {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @kv {dtype = "bf16", shape = array<i64: 192>, space = "io"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @c_kv {dtype = "bf16", shape = array<i64: 4096>, space = "state"}
  schedule.buffer @k_rope {dtype = "bf16", shape = array<i64: 2048>, space = "state"}
  schedule.phase "p" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@h], writes = [@x], base = @h, dim = 256 : i64, eps = 1.0e-06 : f64, weight = "norm_w", xs = @x}
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
    schedule.conv_commit "commit" {reads = [@q, @k, @v], writes = [@cq, @ck, @cv], channels = 4096 : i64, ck = @ck, conv = 4 : i64, cq = @cq, cv = @cv, k = @k, q = @q, v = @v}
    schedule.mla_rope_append "rope" {reads = [@mq, @kv], writes = [@q_rope, @c_kv, @k_rope], heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, c_kv = @c_kv, k_rope = @k_rope, kv = @kv, lora = 128 : i64, q = @mq, q_rope = @q_rope, theta = 1.0e+04 : f64}
  }
  schedule.barrier
  schedule.phase "final" {
    schedule.final_residual "final" {reads = [@h, @acc], writes = [@out], acc = @acc, base = @h, dim = 256 : i64, out = @out}
  }
}

// -----

// No tile width (128, 64, 32 or 16) divides a unit of 8 columns.
schedule.kernel @bad_unit attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 128, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    // expected-error @+1 {{no legal GEMV tiling for these shapes}}
    schedule.w4a16_gemv "proj" {reads = [@x], writes = [@y], epilogue = "bf16", group = 32 : i64, input = @x, k = 256 : i64, n = [64], outputs = [@y], unit = "head", unit_cols = 8 : i64, weights = ["w"]}
  }
}

// -----

// A state chunk is 16..256 columns dividing head_dim.
schedule.kernel @bad_head_dim attributes {threads = 256 : i64} {
  schedule.weight @conv_w {dtype = "bf16", shape = array<i64: 144, 4>}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 48>, space = "io"}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 48>, space = "io"}
  schedule.buffer @v {dtype = "bf16", shape = array<i64: 48>, space = "io"}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 48>, space = "io"}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 2>, space = "io"}
  schedule.buffer @S {dtype = "f32", shape = array<i64: 1152>, space = "state"}
  schedule.buffer @cq {dtype = "bf16", shape = array<i64: 144>, space = "state"}
  schedule.buffer @ck {dtype = "bf16", shape = array<i64: 144>, space = "state"}
  schedule.buffer @cv {dtype = "bf16", shape = array<i64: 144>, space = "state"}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 48>}
  schedule.phase "p" {
    // expected-error @+1 {{no state chunking fits 256 threads and head_dim 24}}
    schedule.kda_head_chunk "kda" {reads = [@q, @k, @v, @g, @beta, @cq, @ck, @cv, @S], writes = [@S, @o], S = @S, beta = @beta, ck = @ck, conv = 4 : i64, conv_w = "conv_w", cq = @cq, cv = @cv, g = @g, head_dim = 24 : i64, heads = 2 : i64, k = @k, o = @o, q = @q, unit = "head", v = @v}
  }
}

// -----

schedule.kernel @bad_nope attributes {threads = 256 : i64} {
  schedule.weight @kv_b.w_q {dtype = "u8", shape = array<i64: 64, 160>, group = 32 : i64}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 96>, space = "io"}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{qk_nope/16 must divide 32}}
    schedule.mla_q_absorb "absorb" {reads = [@q], writes = [@q_abs], rope = 16 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 128 : i64, nope = 48 : i64, q = @q, q_abs = @q_abs, v_head = 32 : i64}
  }
}

// -----

// 256 threads absorb 256 latent rows per task: 384 is not a multiple.
schedule.kernel @bad_lora attributes {threads = 256 : i64} {
  schedule.weight @kv_b.w_q {dtype = "u8", shape = array<i64: 192, 128>, group = 32 : i64}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 768>}
  schedule.phase "p" {
    // expected-error @+1 {{kv_lora must be a multiple of 256}}
    schedule.mla_q_absorb "absorb" {reads = [@q], writes = [@q_abs], rope = 16 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 384 : i64, nope = 32 : i64, q = @q, q_abs = @q_abs, v_head = 32 : i64}
  }
}

// -----

// Experts of 8 columns: narrower than the narrowest (16-wide) tile, their
// rows no whole 16-byte pieces.
schedule.kernel @bad_expert attributes {threads = 256 : i64} {
  schedule.weight @gate.w_q {dtype = "u8", shape = array<i64: 1, 128, 8>, group = 32 : i64}
  schedule.weight @up.w_q {dtype = "u8", shape = array<i64: 1, 128, 8>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 16>}
  schedule.phase "zero" {
    schedule.zero_f32 "sums.zero" {writes = [@sums], buffer = @sums, n = 16 : i64}
  }
  schedule.barrier
  schedule.phase "p" {
    // expected-error @+1 {{output dim 8 is not a multiple of 16: the W4A16 tiles read 16-column pieces of each row}}
    schedule.moe_gate_up "gate_up" {reads = [@x], accumulates = [@sums], gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 8 : i64, slots = 1 : i64, sums = @sums, unit = "slot", up = "up"}
  }
}

// -----

schedule.kernel @bad_kind attributes {threads = 256 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{no partitioning rule for kind 'opaque'}}
    schedule.opaque "c"
  }
}
