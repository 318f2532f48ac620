// RUN: mk-opt %s -split-input-file -verify-diagnostics --schedule-plan-workspace | FileCheck %s

// schedule-plan-workspace on hand-written schedules. A workspace buffer is
// live from the first to the last segment (barrier interval) whose tasks
// touch it; buffers live in disjoint segments (a barrier apart) may share
// memory. Largest first, each at the lowest offset free over its live range,
// every buffer rounded up to 256 bytes. The pass sets each workspace
// buffer's `offset`, the kernel's `workspace_bytes` (at least 256) and each
// counter's `base` (the counters' sizes summed in order). io, state and
// shared buffers are not planned. With debug_capture no two share. The
// pass has no options; its one error is a workspace buffer no task touches.

// A 4-phase chain a barrier apart: @a (1 KB, segments 0-1) and @c (512 B,
// segments 2-3) share offset 0; @b (segments 1-2) overlaps both.
// CHECK-LABEL: schedule.kernel @barriers attributes {threads = 256 : i64, workspace_bytes = 1536 : i64}
// CHECK-NEXT: schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
// CHECK-NEXT: schedule.buffer @a {dtype = "f32", offset = 0 : i64, shape = array<i64: 256>}
// CHECK-NEXT: schedule.buffer @b {dtype = "f32", offset = 1024 : i64, shape = array<i64: 128>}
// CHECK-NEXT: schedule.buffer @c {dtype = "bf16", offset = 0 : i64, shape = array<i64: 256>}
// CHECK-NEXT: schedule.buffer @out {dtype = "bf16", shape = array<i64: 256>, space = "io"}
schedule.kernel @barriers attributes {threads = 256 : i64} {
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @a {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @b {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @c {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @out {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.phase "p0" {
    schedule.opaque "pa" {reads = [@h], writes = [@a]}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.opaque "pb" {reads = [@a], writes = [@b]}
  }
  schedule.barrier
  schedule.phase "p2" {
    schedule.opaque "pc" {reads = [@b], writes = [@c]}
  }
  schedule.barrier
  schedule.phase "p3" {
    schedule.opaque "pd" {reads = [@c], writes = [@out]}
  }
}

// -----

// The same chain ordered by counters instead: one segment, so nothing
// shares (@c after @a and @b). Counter bases follow declaration order.
// CHECK-LABEL: schedule.kernel @counters attributes {threads = 256 : i64, workspace_bytes = 2048 : i64}
// CHECK: schedule.buffer @a {dtype = "f32", offset = 0 : i64, shape = array<i64: 256>}
// CHECK-NEXT: schedule.buffer @b {dtype = "f32", offset = 1024 : i64, shape = array<i64: 128>}
// CHECK-NEXT: schedule.buffer @c {dtype = "bf16", offset = 1536 : i64, shape = array<i64: 256>}
// CHECK: schedule.counter @pa.done {base = 0 : i64, size = 1 : i64}
// CHECK-NEXT: schedule.counter @pb.ready {base = 1 : i64, size = 4 : i64}
// CHECK-NEXT: schedule.counter @pc.done {base = 5 : i64, size = 1 : i64}
schedule.kernel @counters attributes {threads = 256 : i64} {
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @a {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @b {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @c {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @out {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.counter @pa.done {size = 1 : i64}
  schedule.counter @pb.ready {size = 4 : i64}
  schedule.counter @pc.done {size = 1 : i64}
  schedule.phase "p0" {
    schedule.opaque "pa" {reads = [@h], writes = [@a]}
    schedule.signal @pa.done {task = "pa"}
  }
  schedule.phase "p1" {
    schedule.opaque "pb" {count = 4 : i64, reads = [@a], writes = [@b]}
    schedule.wait @pa.done {task = "pb", divisor = 4 : i64, target = 1 : i64}
    schedule.signal @pb.ready {task = "pb"}
  }
  schedule.phase "p2" {
    schedule.opaque "pc" {count = 4 : i64, reads = [@b], writes = [@c]}
    schedule.wait @pb.ready {task = "pc", target = 1 : i64}
    schedule.signal @pc.done {task = "pc", divisor = 4 : i64}
  }
  schedule.phase "p3" {
    schedule.opaque "pd" {reads = [@c], writes = [@out]}
    schedule.wait @pc.done {task = "pd", target = 4 : i64}
  }
}

// -----

// debug_capture: every buffer is live for the whole kernel.
// CHECK-LABEL: schedule.kernel @capture attributes {debug_capture, threads = 256 : i64, workspace_bytes = 2048 : i64}
// CHECK: schedule.buffer @a {dtype = "f32", offset = 0 : i64, shape = array<i64: 256>}
// CHECK-NEXT: schedule.buffer @b {dtype = "f32", offset = 1024 : i64, shape = array<i64: 128>}
// CHECK-NEXT: schedule.buffer @c {dtype = "bf16", offset = 1536 : i64, shape = array<i64: 256>}
schedule.kernel @capture attributes {threads = 256 : i64, debug_capture} {
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @a {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @b {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @c {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @out {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.phase "p0" {
    schedule.opaque "pa" {reads = [@h], writes = [@a]}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.opaque "pb" {reads = [@a], writes = [@b]}
  }
  schedule.barrier
  schedule.phase "p2" {
    schedule.opaque "pc" {reads = [@b], writes = [@c]}
  }
  schedule.barrier
  schedule.phase "p3" {
    schedule.opaque "pd" {reads = [@c], writes = [@out]}
  }
}

// -----

// An accumulator is live from its zeroing (segment 0) to its last reader
// (segment 3), also in between: @mid, used in segment 1 only, does not
// share its memory. 4-byte buffers take 256 bytes each. State and shared
// buffers get no offset.
// CHECK-LABEL: schedule.kernel @liveness attributes {threads = 256 : i64, workspace_bytes = 2560 : i64}
// CHECK-NEXT: schedule.buffer @S {dtype = "f32", shape = array<i64: 2, 32, 32>, space = "state"}
// CHECK-NEXT: schedule.buffer @c_kv {dtype = "bf16", shape = array<i64: -1, 128>, space = "state"}
// CHECK-NEXT: schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
// CHECK-NEXT: schedule.buffer @acc {dtype = "f32", offset = 0 : i64, shape = array<i64: 256>}
// CHECK-NEXT: schedule.buffer @mid {dtype = "f32", offset = 1024 : i64, shape = array<i64: 256>}
// CHECK-NEXT: schedule.buffer @beta {dtype = "bf16", offset = 2048 : i64, shape = array<i64: 2>}
// CHECK-NEXT: schedule.buffer @gate {dtype = "bf16", offset = 2304 : i64, shape = array<i64: 2>}
schedule.kernel @liveness attributes {threads = 256 : i64} {
  schedule.buffer @S {dtype = "f32", shape = array<i64: 2, 32, 32>, space = "state"}
  schedule.buffer @c_kv {dtype = "bf16", shape = array<i64: -1, 128>, space = "state"}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @mid {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 2>}
  schedule.buffer @gate {dtype = "bf16", shape = array<i64: 2>}
  schedule.phase "p0" {
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256}
    schedule.opaque "norm" {partition = #schedule.partition<every_block>, reads = [@S, @c_kv], writes = [@xs]}
    schedule.opaque "beta" {reads = [@xs], writes = [@beta]}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.opaque "gate" {reads = [@beta], writes = [@gate]}
    schedule.opaque "mid" {writes = [@mid]}
  }
  schedule.barrier
  schedule.phase "p2" {
    schedule.opaque "sum" {reads = [@gate], accumulates = [@acc]}
  }
  schedule.barrier
  schedule.phase "p3" {
    schedule.opaque "use" {reads = [@acc], writes = [@S]}
  }
}

// -----

// Every kernel is planned on its own; one without workspace buffers or
// counters still gets the minimum arena of 256 bytes.
// CHECK-LABEL: schedule.kernel @first attributes {threads = 256 : i64, workspace_bytes = 256 : i64}
// CHECK-NEXT: schedule.buffer @x {dtype = "bf16", offset = 0 : i64, shape = array<i64: 64>}
// CHECK-NEXT: schedule.counter @x.done {base = 0 : i64, size = 2 : i64}
// CHECK-LABEL: schedule.kernel @second attributes {threads = 256 : i64, workspace_bytes = 512 : i64}
// CHECK-NEXT: schedule.buffer @x {dtype = "bf16", offset = 0 : i64, shape = array<i64: 64>}
// CHECK-NEXT: schedule.buffer @y {dtype = "bf16", offset = 256 : i64, shape = array<i64: 64>}
// CHECK-NEXT: schedule.counter @y.done {base = 0 : i64, size = 3 : i64}
// CHECK-LABEL: schedule.kernel @empty attributes {threads = 256 : i64, workspace_bytes = 256 : i64}
schedule.kernel @first attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @x.done {size = 2 : i64}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x]}
  }
}
schedule.kernel @second attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @y.done {size = 3 : i64}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x, @y]}
  }
}
schedule.kernel @empty attributes {threads = 256 : i64} {
}

// -----

schedule.kernel @unused attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  // expected-error @+1 {{workspace buffer is never used}}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "p" {
    schedule.opaque "w" {writes = [@x]}
  }
}
