// RUN: mk-opt %s "--schedule-poll-router-logits=enabled=true" | FileCheck %s
// RUN: mk-opt %s "--schedule-poll-router-logits=enabled=false" | FileCheck %s --check-prefix=OFF
// A router of more experts than max-experts (here 8 > 4) keeps its counter,
// and no task anywhere polls; at max-experts=8 the 8-row routers poll.
// RUN: mk-opt %s "--schedule-poll-router-logits=max-experts=4" | FileCheck %s --check-prefix=WIDE
// RUN: mk-opt %s "--schedule-poll-router-logits=max-experts=4" | FileCheck %s --check-prefix=NOPOLL
// RUN: mk-opt %s "--schedule-poll-router-logits=max-experts=8" | FileCheck %s
// A bad max-experts is refused, also where the pass is off.
// RUN: not mk-opt %s "--schedule-poll-router-logits=max-experts=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not mk-opt %s "--schedule-poll-router-logits=enabled=false max-experts=-5" 2>&1 | FileCheck %s --check-prefix=BAD5
// Run twice: the second run finds nothing left to poll.
// RUN: mk-opt %s "--schedule-poll-router-logits=enabled=true" "--schedule-poll-router-logits=enabled=true" | FileCheck %s

// The routed expert tasks poll the router's logits instead of waiting for
// its counter: their waits on @route.done go, and the counter and its
// signal with them; the router stores for polling; a zeroing task in the
// first phase (a grid barrier before the router) clears the logits. The
// down task's wait for its expert's gate/up sums stays.
// CHECK-LABEL: schedule.kernel @k
// CHECK-NOT: schedule.counter @route.done
// CHECK: schedule.counter @gu.ready
// CHECK-LABEL: schedule.phase "zero"
// CHECK: schedule.zero_f32 "route.clear" {buffer = @logits, bytes = 16 : i64, n = 4 : i64, partition = #schedule.partition<slices>}
// CHECK-LABEL: schedule.phase "route"
// CHECK: schedule.bf16_rows "route" {{{.*}}polled_output
// CHECK-NOT: schedule.signal @route.done
// CHECK-LABEL: schedule.phase "gate_up"
// CHECK: schedule.moe_gate_up "gu" {{{.*}}poll_logits
// CHECK-NOT: schedule.wait @route.done
// CHECK: schedule.signal @gu.ready
// CHECK-LABEL: schedule.phase "down"
// CHECK: schedule.moe_down "down" {{{.*}}poll_logits
// CHECK-NEXT: schedule.wait @gu.ready {divisor = 32 : i64, target = 32 : i64, task = "down"}
// CHECK-NEXT: }
// Another task reads the logits: nothing changes.
// CHECK-LABEL: schedule.kernel @other
// CHECK: schedule.counter @route.done
// CHECK-NOT: poll
// CHECK: schedule.wait @route.done {divisor = 64 : i64, target = 4 : i64, task = "gu"}
// A task named like the clearing already: the clearing's name gets a suffix.
// CHECK-LABEL: schedule.kernel @dup
// CHECK: schedule.zero_f32 "route.clear" {buffer = @acc
// CHECK: schedule.zero_f32 "route.clear.1" {buffer = @logits
// WIDE-LABEL: schedule.kernel @k
// WIDE: schedule.counter @route.done
// WIDE: schedule.wait @route.done
// WIDE-LABEL: schedule.kernel @other
// NOPOLL-NOT: poll
// NOPOLL-NOT: {buffer = @logits
// BAD: error: schedule-poll-router-logits: max-experts must be at least 1, got 0
// BAD5: error: schedule-poll-router-logits: max-experts must be at least 1, got -5
// OFF-NOT: poll
// OFF-NOT: clear.1

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

schedule.kernel @other attributes {threads = 256 : i64} {
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
  schedule.phase "peek" {
    schedule.opaque "peek" {reads = [@logits]}
    schedule.wait @route.done {target = 4 : i64, task = "peek"}
  }
  schedule.phase "after" {
    schedule.w4a16_gemv "proj" {epilogue = "bf16", group = 32 : i64, input = @sums, input_offset = 0 : i64, k = 256 : i64, ksplit = 1 : i64, n = [256], outputs = [@y], tiles = 2 : i64, tn = 128 : i64, weights = ["proj"], bytes = 40960 : i64, count = 2 : i64, partition = #schedule.partition<cols>}
    schedule.wait @gu.ready {divisor = 2 : i64, span = 2 : i64, target = 32 : i64, task = "proj"}
  }
}

schedule.kernel @dup attributes {threads = 256 : i64} {
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
    schedule.zero_f32 "route.clear" {buffer = @acc, n = 256 : i64, bytes = 1024 : i64, count = 1 : i64}
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
