// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=8" | FileCheck %s --check-prefix=OFF
// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=8 recut-overflowing-phases=true" | FileCheck %s
// The pass run again on its own output gives the same cuts (a task the
// sweep leaves as it was included: @declined).
// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=8 recut-overflowing-phases=true" | mk-opt -split-input-file "--schedule-partition-work=target-sms=8 recut-overflowing-phases=true" | FileCheck %s
// A pinned task is judged by the pinned tasks' load: "big" keeps its 8
// instances (split-K 2) although "z", which could move but for its
// reader, doubles a block (judged with "z", its 4 instances of split-K 1
// would lower that block's load).
// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=8 recut-overflowing-phases=true" | FileCheck %s --check-prefix=MOVABLE

// recut-overflowing-phases (schedule-partition-work, opt-in) on the 48B's
// MoE norm phase in miniature, 8 blocks: both tasks read the norm's output
// in shared memory, so neither may leave the phase. phase-budget cuts the
// router first for the whole grid (8 rows, one per task) and leaves the
// shared expert's gate/up a quarter of it (split-K 2): 10 instances, two
// blocks run a router row and a 128 KB tile. With the option the router
// is cut again for the 6 blocks the tile leaves (2 rows per task, 4
// instances), then the tile for the 4 the router leaves (split-K 4): 8
// instances, one per block.
// OFF-LABEL: schedule.kernel @router
// OFF-NOT: cut_blocks
// OFF: schedule.bf16_rows "router" {{{.*}}count = 8 : i64{{.*}}rows_per_task = 1 : i64
// OFF-NOT: cut_blocks
// OFF: schedule.w4a16_gemv "shared" {{{.*}}count = 2 : i64{{.*}}ksplit = 2 : i64
// CHECK-LABEL: schedule.kernel @router
// CHECK: schedule.bf16_rows "router" {{{.*}}count = 4 : i64{{.*}}cut_blocks = 6 : i64{{.*}}rows_per_task = 2 : i64
// CHECK: schedule.w4a16_gemv "shared" {{{.*}}count = 4 : i64{{.*}}cut_blocks = 4 : i64{{.*}}ksplit = 4 : i64
schedule.kernel @router attributes {threads = 256 : i64} {
  schedule.weight @nw {dtype = "bf16", shape = array<i64: 4096>}
  schedule.weight @rw {dtype = "bf16", shape = array<i64: 8, 4096>}
  schedule.weight @s.w_q {dtype = "u8", shape = array<i64: 2048, 128>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @res {dtype = "bf16", shape = array<i64: 4096>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 4096>, space = "shared"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @u {dtype = "f32", shape = array<i64: 128>}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 128 : i64}
  }
  schedule.barrier
  schedule.phase "norm" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@x], writes = [@res, @xs], base = @x, dim = 4096 : i64, eps = 1.0e-06 : f64, out = @res, weight = "nw", xs = @xs}
    schedule.bf16_rows "router" {reads = [@xs], writes = [@logits], input = @xs, k = 4096 : i64, output = @logits, rows = 8 : i64, weight = "rw"}
    schedule.w4a16_gemv "shared" {reads = [@xs], accumulates = [@acc], epilogue = "atomic_f32", group = 128 : i64, input = @xs, k = 4096 : i64, n = [128], outputs = [@acc], weights = ["s"]}
  }
  schedule.barrier
  schedule.phase "use" {
    schedule.zero_f32 "use" {reads = [@logits, @acc], buffer = @u, n = 128 : i64}
  }
}

// -----

// MOVABLE-LABEL: schedule.kernel @movable
// MOVABLE: schedule.w4a16_gemv "big" {{{.*}}count = 8 : i64
// MOVABLE-NOT: cut_blocks
// MOVABLE-SAME: ksplit = 2 : i64
// MOVABLE-NEXT: schedule.zero_f32 "z"
schedule.kernel @movable attributes {threads = 256 : i64} {
  schedule.weight @nw {dtype = "bf16", shape = array<i64: 1024>}
  schedule.weight @wb.w_q {dtype = "u8", shape = array<i64: 512, 512>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 1024>, space = "io"}
  schedule.buffer @res {dtype = "bf16", shape = array<i64: 1024>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 1024>, space = "shared"}
  schedule.buffer @y {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @z {dtype = "f32", shape = array<i64: 65536>}
  schedule.buffer @u {dtype = "f32", shape = array<i64: 128>}
  schedule.phase "zero" {
    schedule.zero_f32 "y.zero" {buffer = @y, n = 512 : i64}
  }
  schedule.barrier
  schedule.phase "norm" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@x], writes = [@res, @xs], base = @x, dim = 1024 : i64, eps = 1.0e-06 : f64, out = @res, weight = "nw", xs = @xs}
    schedule.w4a16_gemv "big" {reads = [@xs], accumulates = [@y], epilogue = "atomic_f32", group = 128 : i64, input = @xs, k = 1024 : i64, n = [512], outputs = [@y], weights = ["wb"]}
    schedule.zero_f32 "z" {writes = [@z], buffer = @z, n = 65536 : i64}
  }
  schedule.barrier
  schedule.phase "use" {
    schedule.zero_f32 "use" {reads = [@y, @z], buffer = @u, n = 128 : i64}
  }
}

// -----

// The sweep leaves "B" as phase-budget cut it (split-K 2 for the quarter
// of the grid "A" left): cut for the 4 blocks "A" leaves now (split-K 4) it
// would not lower the phase's busiest block, an instance of "A". It keeps
// that cut with its blocks recorded (cut_blocks 2), so that the pass run
// again, where "A" takes 4 instances, does not cut it for 4.
// CHECK-LABEL: schedule.kernel @declined
// CHECK: schedule.w4a16_gemv "A" {{{.*}}count = 4 : i64{{.*}}cut_blocks = 6 : i64{{.*}}ksplit = 2 : i64
// CHECK: schedule.w4a16_gemv "B" {{{.*}}count = 2 : i64{{.*}}cut_blocks = 2 : i64{{.*}}ksplit = 2 : i64
schedule.kernel @declined attributes {threads = 256 : i64} {
  schedule.weight @nw {dtype = "bf16", shape = array<i64: 2048>}
  schedule.weight @a.w_q {dtype = "u8", shape = array<i64: 1024, 256>, group = 128 : i64}
  schedule.weight @b.w_q {dtype = "u8", shape = array<i64: 1024, 128>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 2048>, space = "io"}
  schedule.buffer @res {dtype = "bf16", shape = array<i64: 2048>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 2048>, space = "shared"}
  schedule.buffer @ya {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @yb {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @u {dtype = "f32", shape = array<i64: 128>}
  schedule.phase "zero" {
    schedule.zero_f32 "ya.zero" {buffer = @ya, n = 256 : i64}
    schedule.zero_f32 "yb.zero" {buffer = @yb, n = 128 : i64}
  }
  schedule.barrier
  schedule.phase "norm" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@x], writes = [@res, @xs], base = @x, dim = 2048 : i64, eps = 1.0e-06 : f64, out = @res, weight = "nw", xs = @xs}
    schedule.w4a16_gemv "A" {reads = [@xs], accumulates = [@ya], epilogue = "atomic_f32", group = 128 : i64, input = @xs, k = 2048 : i64, n = [256], outputs = [@ya], weights = ["a"]}
    schedule.w4a16_gemv "B" {reads = [@xs], accumulates = [@yb], epilogue = "atomic_f32", group = 128 : i64, input = @xs, k = 2048 : i64, n = [128], outputs = [@yb], weights = ["b"]}
  }
  schedule.barrier
  schedule.phase "use" {
    schedule.zero_f32 "use" {reads = [@ya, @yb], buffer = @u, n = 128 : i64}
  }
}
