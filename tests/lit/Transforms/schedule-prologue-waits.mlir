// RUN: mk-opt %s --schedule-prologue-waits | FileCheck %s
// RUN: mk-opt %s "--schedule-prologue-waits=enabled=false" | FileCheck %s --check-prefix=OFF
// Run twice: the marked wait stays the task's only prologue wait.
// RUN: mk-opt %s --schedule-prologue-waits --schedule-prologue-waits | FileCheck %s
// RUN: mk-opt %s "--schedule-prologue-waits=attention=false gemv=false" | FileCheck %s --check-prefix=DOWN
// RUN: mk-opt %s "--schedule-prologue-waits=absorb=true" | FileCheck %s --check-prefix=ABSORB
// RUN: mk-opt %s "--schedule-prologue-waits=combine=true" | FileCheck %s --check-prefix=COMBINE

// The down task's wait for its expert's gate/up sums moves into its
// prologue (its weights do not depend on them); its wait for the router,
// which picks the expert and so its weights, stays before it. The GEMV's
// wait for its input (in global memory, which the tile stages) moves too
// (`gemv`, on by default); with gemv=false (DOWN prefix) it stays.
// CHECK-LABEL: schedule.phase "down"
// CHECK-DAG: schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "down"}
// CHECK-DAG: schedule.wait @gu.ready {divisor = 32 : i64, in_prologue, target = 32 : i64, task = "down"}
// CHECK-LABEL: schedule.phase "after"
// CHECK: schedule.wait @gu.ready {divisor = 2 : i64, in_prologue, span = 2 : i64, target = 32 : i64, task = "proj"}
// DOWN-LABEL: schedule.phase "down"
// DOWN: schedule.wait @gu.ready {divisor = 32 : i64, in_prologue, target = 32 : i64, task = "down"}
// DOWN-LABEL: schedule.phase "after"
// DOWN-NOT: in_prologue
// DOWN-LABEL: schedule.kernel @k2
// ABSORB-LABEL: schedule.phase "after"
// ABSORB: schedule.wait @gu.ready {divisor = 2 : i64, in_prologue, span = 2 : i64, target = 32 : i64, task = "proj"}
// OFF-NOT: in_prologue
// Two counters guard the sums (two gate/up tasks): the first wait moves, the
// second stays, also when the pass runs again on its own output.
// CHECK-LABEL: schedule.kernel @k2
// CHECK: schedule.phase "down"
// CHECK: schedule.wait @gu.ready {divisor = 32 : i64, in_prologue, target = 32 : i64, task = "down"}
// CHECK-NEXT: schedule.wait @gu2.ready {divisor = 32 : i64, target = 32 : i64, task = "down"}
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
    schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "down"}
    schedule.wait @gu.ready {divisor = 32 : i64, target = 32 : i64, task = "down"}
  }
  schedule.phase "after" {
    schedule.w4a16_gemv "proj" {epilogue = "bf16", group = 32 : i64, input = @sums, input_offset = 0 : i64, k = 256 : i64, ksplit = 1 : i64, n = [256], outputs = [@y], tiles = 2 : i64, tn = 128 : i64, weights = ["proj"], bytes = 40960 : i64, count = 2 : i64, partition = #schedule.partition<cols>}
    schedule.wait @gu.ready {divisor = 2 : i64, span = 2 : i64, target = 32 : i64, task = "proj"}
  }
}

schedule.kernel @k2 attributes {threads = 256 : i64} {
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
  schedule.counter @route.done {size = 1 : i64}
  schedule.counter @gu.ready {size = 2 : i64}
  schedule.counter @gu2.ready {size = 2 : i64}
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
  schedule.phase "gate_up2" {
    schedule.moe_gate_up "gu2" {experts = 8 : i64, gate = "gate", group = 32 : i64, hidden = 256 : i64, input = @x, inter = 128 : i64, ksplit = 2 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 8 : i64, tn = 16 : i64, top_k = 2 : i64, up = "up", bytes = 81920 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
    schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "gu2"}
    schedule.signal @gu2.ready {divisor = 32 : i64, task = "gu2"}
  }
  schedule.phase "down" {
    schedule.moe_down "down" {acc = @acc, down = "down", experts = 8 : i64, group = 32 : i64, hidden = 256 : i64, inter = 128 : i64, ksplit = 4 : i64, logits = @logits, scaling = 1.0 : f64, slots = 2 : i64, sums = @sums, tiles = 16 : i64, tn = 16 : i64, top_k = 2 : i64, bytes = 49152 : i64, count = 64 : i64, partition = #schedule.partition<experts>}
    schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "down"}
    schedule.wait @gu.ready {divisor = 32 : i64, target = 32 : i64, task = "down"}
    schedule.wait @gu2.ready {divisor = 32 : i64, target = 32 : i64, task = "down"}
  }
}

// An MLA attention chunk's wait for the absorbed queries moves into its
// prologue (`attention`, on by default: its first cache rows are asked for
// before it); its wait for the rope/append task, which writes the step's
// new cache row and its rope queries, stays before it. With
// attention=false (DOWN prefix) both stay.
// CHECK-LABEL: schedule.kernel @mla
// CHECK-DAG: schedule.wait @rope.done {divisor = 64 : i64, target = 1 : i64, task = "attn"}
// CHECK-DAG: schedule.wait @absorb.done {divisor = 64 : i64, in_prologue, target = 4 : i64, task = "attn"}
// DOWN-LABEL: schedule.kernel @mla
// DOWN-NOT: in_prologue
// DOWN-LABEL: schedule.kernel @gemv_shared
// ABSORB-LABEL: schedule.kernel @mla
// ABSORB: schedule.wait @absorb.done {divisor = 64 : i64, in_prologue, target = 4 : i64, task = "attn"}
schedule.kernel @mla attributes {threads = 256 : i64} {
  schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
  schedule.buffer @q_rope {dtype = "bf16", shape = array<i64: 32>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
  schedule.counter @rope.done {size = 1 : i64}
  schedule.counter @absorb.done {size = 1 : i64}
  schedule.phase "rope" {
    schedule.opaque "rope" {writes = [@q_rope, @state.0.c_kv, @state.0.k_rope]}
    schedule.opaque "absorb" {count = 4 : i64, writes = [@q_abs]}
    schedule.signal @rope.done {divisor = 1 : i64, task = "rope"}
    schedule.signal @absorb.done {divisor = 4 : i64, task = "absorb"}
  }
  schedule.phase "attention" {
    schedule.mla_attention_chunk "attn" {c_kv = @state.0.c_kv, count = 64 : i64, head_group = 2 : i64, heads = 2 : i64, k_rope = @state.0.k_rope, lora = 128 : i64, max_chunks = 64 : i64, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<chunks>, q_abs = @q_abs, q_rope = @q_rope, rope = 16 : i64, scale = 0.14433756729740646 : f64}
    schedule.wait @rope.done {divisor = 64 : i64, target = 1 : i64, task = "attn"}
    schedule.wait @absorb.done {divisor = 64 : i64, target = 4 : i64, task = "attn"}
  }
}

// A GEMV whose input is in shared memory has no staging to wait before:
// its wait stays before it.
// CHECK-LABEL: schedule.kernel @gemv_shared
// CHECK-NOT: in_prologue
// CHECK-LABEL: schedule.kernel @absorb
schedule.kernel @gemv_shared attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 128, 256>}
  schedule.weight @proj.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 256>}
  schedule.weight @proj.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 8, 256>}
  schedule.counter @p.done {size = 1 : i64}
  schedule.phase "p" {
    schedule.opaque "p" {writes = [@x]}
    schedule.signal @p.done {divisor = 1 : i64, task = "p"}
  }
  schedule.phase "after" {
    schedule.w4a16_gemv "proj" {epilogue = "bf16", group = 32 : i64, input = @x, input_offset = 0 : i64, k = 256 : i64, ksplit = 1 : i64, n = [256], outputs = [@y], tiles = 2 : i64, tn = 128 : i64, weights = ["proj"], bytes = 40960 : i64, count = 2 : i64, partition = #schedule.partition<cols>}
    schedule.wait @p.done {divisor = 2 : i64, target = 1 : i64, task = "proj"}
  }
}

// The MLA query absorption's wait for the projected queries moves into its
// prologue only with absorb=true (its first rows of W_kv_b are loaded
// before it).
// CHECK-NOT: in_prologue
// DOWN-LABEL: schedule.kernel @absorb
// DOWN-NOT: in_prologue
// ABSORB-LABEL: schedule.kernel @absorb
// ABSORB: schedule.wait @proj.done {divisor = 2 : i64, in_prologue, target = 1 : i64, task = "absorb"}
schedule.kernel @absorb attributes {threads = 256 : i64} {
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 96>}
  schedule.buffer @q_abs {dtype = "f32", shape = array<i64: 256>}
  schedule.weight @kv_b.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 64, 128>}
  schedule.weight @kv_b.scales {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.weight @kv_b.zeros {dtype = "bf16", group = 32 : i64, shape = array<i64: 4, 128>}
  schedule.counter @proj.done {size = 1 : i64}
  schedule.phase "proj" {
    schedule.opaque "proj" {writes = [@q]}
    schedule.signal @proj.done {divisor = 1 : i64, task = "proj"}
  }
  schedule.phase "absorb" {
    schedule.mla_q_absorb "absorb" {bytes = 4096 : i64, count = 2 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 128 : i64, nope = 32 : i64, partition = #schedule.partition<heads>, q = @q, q_abs = @q_abs, rope = 16 : i64, v_head = 32 : i64}
    schedule.wait @proj.done {divisor = 2 : i64, target = 1 : i64, task = "absorb"}
  }
}

// The MLA combine's wait for the attention chunks' partials (three
// buffers, all of them what its merge reads after the wait) moves into its
// prologue only with combine=true (its first W_v rows are asked for before
// it).
// CHECK-LABEL: schedule.kernel @combine
// CHECK-NOT: in_prologue
// ABSORB-LABEL: schedule.kernel @combine
// ABSORB-NOT: in_prologue
// COMBINE-LABEL: schedule.kernel @combine
// COMBINE: schedule.wait @attn.done {divisor = 8 : i64, in_prologue, target = 4 : i64, task = "combine"}
schedule.kernel @combine attributes {threads = 256 : i64} {
  schedule.buffer @part_m {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_l {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @part_acc {dtype = "f32", shape = array<i64: 16384>}
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
    schedule.opaque "attn" {count = 4 : i64, writes = [@part_m, @part_l, @part_acc]}
    schedule.signal @attn.done {divisor = 4 : i64, task = "attn"}
  }
  schedule.phase "combine" {
    schedule.mla_combine_wv "combine" {bytes = 4096 : i64, count = 8 : i64, group = 32 : i64, heads = 2 : i64, kv_b = "kv_b", lora = 128 : i64, nope = 32 : i64, o = @o, part_acc = @part_acc, part_l = @part_l, part_m = @part_m, partition = #schedule.partition<heads>, slices = 4 : i64, v_head = 32 : i64}
    schedule.wait @attn.done {divisor = 8 : i64, target = 4 : i64, task = "combine"}
  }
}

// A GEMV staging a gated norm of its input (schedule-fuse-kda-gated-norm)
// stages two producers' outputs, o and the gate: both waits move into its
// prologue (two at most); the wait for the sums' zeroing stays before it.
// CHECK-LABEL: schedule.kernel @gated
// CHECK: schedule.wait @zero.done {divisor = 2 : i64, target = 1 : i64, task = "proj"}
// CHECK-NEXT: schedule.wait @gate.done {divisor = 2 : i64, in_prologue, target = 1 : i64, task = "proj"}
// CHECK-NEXT: schedule.wait @delta.done {divisor = 2 : i64, in_prologue, target = 2 : i64, task = "proj"}
// DOWN-LABEL: schedule.kernel @gated
// DOWN-NOT: in_prologue
// ABSORB-LABEL: schedule.kernel @gated
// ABSORB: in_prologue
schedule.kernel @gated attributes {threads = 256 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @gate {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 64>}
  schedule.weight @w.w_q {dtype = "u8", group = 128 : i64, shape = array<i64: 128, 64>}
  schedule.weight @w.scales {dtype = "bf16", group = 128 : i64, shape = array<i64: 2, 64>}
  schedule.weight @w.zeros {dtype = "bf16", group = 128 : i64, shape = array<i64: 2, 64>}
  schedule.weight @nw {dtype = "bf16", shape = array<i64: 128>}
  schedule.counter @zero.done {size = 1 : i64}
  schedule.counter @gate.done {size = 1 : i64}
  schedule.counter @delta.done {size = 1 : i64}
  schedule.phase "produce" {
    schedule.zero_f32 "zero" {buffer = @acc, n = 64 : i64, count = 1 : i64}
    schedule.opaque "delta" {count = 2 : i64, writes = [@o]}
    schedule.opaque "gate" {count = 1 : i64, writes = [@gate]}
    schedule.signal @zero.done {task = "zero"}
    schedule.signal @delta.done {divisor = 2 : i64, task = "delta"}
    schedule.signal @gate.done {task = "gate"}
  }
  schedule.phase "project" {
    schedule.w4a16_gemv "proj" {count = 2 : i64, epilogue = "atomic_f32", input = @o, input_offset = 0 : i64, outputs = [@acc], group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, n = [64], tn = 64 : i64, weights = ["w"], gated_norm_gate = @gate, gated_norm_weight = "nw", gated_norm_eps = 1.0e-05, gated_norm_head_dim = 128}
    schedule.wait @zero.done {divisor = 2 : i64, target = 1 : i64, task = "proj"}
    schedule.wait @gate.done {divisor = 2 : i64, target = 1 : i64, task = "proj"}
    schedule.wait @delta.done {divisor = 2 : i64, target = 2 : i64, task = "proj"}
  }
}
