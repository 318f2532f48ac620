// RUN: mk-opt %s "--schedule-fuse-kda-o-proj=enabled=true" | FileCheck %s
// RUN: mk-opt %s --schedule-fuse-kda-o-proj | FileCheck %s --check-prefix=OFF
// RUN: mk-opt %s "--schedule-fuse-kda-o-proj=enabled=true" --schedule-tile-weights | FileCheck %s --check-prefix=TILES
// RUN: mk-opt %s "--schedule-fuse-kda-o-proj=enabled=true" "--schedule-tile-weights=arithmetic=int8" | FileCheck %s --check-prefix=INT8

// Off by default (measured no faster, docs/perf-notes.md #60-#62).
// Layer a: the gated-delta task's chunks (16 rows) are whole steps of the
// projection's 128-wide tiles: the GEMV goes into the task (o_weight,
// o_acc, o_n; `o_acc` makes the task accumulate into the sums), and with
// it the phase it
// leaves empty and that phase's barrier.
// CHECK-LABEL: schedule.kernel @k
// CHECK: schedule.phase "a.delta"
// The fused task streams its own bytes and all of the projection's.
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "a.delta" {{{.*}}bytes = 33768 : i64{{.*}}o_acc = @a.acc{{.*}}o_n = 256 : i64{{.*}}o_weight = "a.o_proj"
// CHECK-NOT: schedule.{{[a-z0-9_]+}} "a.o_proj"
// CHECK-NOT: schedule.phase "a.o_proj"
// Layer b: chunks of 8 rows are no whole step: the GEMV stays.
// CHECK: schedule.{{[a-z0-9_]+}} "b.delta"
// CHECK-NOT: o_weight
// CHECK: schedule.{{[a-z0-9_]+}} "b.o_proj"
// Layer c: a GEMV with a bf16 epilogue (no split-K sums): stays.
// CHECK: schedule.{{[a-z0-9_]+}} "c.o_proj"
// CHECK: schedule.barrier
// CHECK-NEXT: schedule.phase "after"
// OFF: schedule.{{[a-z0-9_]+}} "a.o_proj"
// OFF-NOT: o_weight
// The folded projection's weight is packed for 128-wide row slices in the
// exact order; the integer order has no 16-row slices, so it stays row-major.
// TILES: schedule.weight @a.o_proj.w_q {{{.*}}order = "mma", {{.*}}tile = 128 : i64}
// TILES: schedule.weight @b.o_proj.w_q {{{.*}}order = "mma", {{.*}}tile = 128 : i64}
// TILES: schedule.weight @c.o_proj.w_q {{{.*}}order = "mma", {{.*}}tile = 128 : i64}
// INT8: schedule.weight @a.o_proj.w_q {dtype = "u8", group = 128 : i64, shape = array<i64: 128, 256>}{{$}}
// INT8: schedule.weight @b.o_proj.w_q {{{.*}}order = "int8", {{.*}}tile = 128 : i64}
// INT8: schedule.weight @c.o_proj.w_q {{{.*}}order = "int8", {{.*}}tile = 128 : i64}
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @g {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 2>, space = "io"}
  schedule.buffer @S {dtype = "f32", shape = array<i64: 2, 128, 128>, space = "state"}
  schedule.buffer @cq {dtype = "bf16", shape = array<i64: 3, 256>, space = "state"}
  schedule.buffer @a.o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @a.acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @b.o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @b.acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @c.o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @c.y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @conv_w {dtype = "bf16", shape = array<i64: 3, 256, 4>}
  schedule.weight @a.o_proj.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.weight @a.o_proj.scales {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.weight @a.o_proj.zeros {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.weight @b.o_proj.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.weight @b.o_proj.scales {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.weight @b.o_proj.zeros {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.weight @c.o_proj.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.weight @c.o_proj.scales {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.weight @c.o_proj.zeros {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "a.acc.zero" {count = 1 : i64, writes = [@a.acc], buffer = @a.acc, n = 256 : i64}
    schedule.zero_f32 "b.acc.zero" {count = 1 : i64, writes = [@b.acc], buffer = @b.acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "a.delta" {
    schedule.kda_head_chunk "a.delta" {bytes = 1000 : i64, count = 16 : i64, reads = [@q, @g, @beta, @cq, @S], writes = [@S, @a.o], q = @q, k = @q, v = @q, g = @g, beta = @beta, o = @a.o, S = @S, cq = @cq, ck = @cq, cv = @cq, conv_w = "conv_w", conv = 4 : i64, head_dim = 128 : i64, heads = 2 : i64, chunk = 16 : i64}
  }
  schedule.barrier
  schedule.phase "a.o_proj" {
    schedule.w4a16_gemv "a.o_proj" {bytes = 32768 : i64, count = 4 : i64, reads = [@a.o], accumulates = [@a.acc], epilogue = "atomic_f32", input = @a.o, input_offset = 0 : i64, outputs = [@a.acc], group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, n = [256], tn = 128 : i64, weights = ["a.o_proj"]}
  }
  schedule.barrier
  schedule.phase "b.delta" {
    schedule.kda_head_chunk "b.delta" {count = 32 : i64, reads = [@q, @g, @beta, @cq, @S], writes = [@S, @b.o], q = @q, k = @q, v = @q, g = @g, beta = @beta, o = @b.o, S = @S, cq = @cq, ck = @cq, cv = @cq, conv_w = "conv_w", conv = 4 : i64, head_dim = 128 : i64, heads = 2 : i64, chunk = 8 : i64}
  }
  schedule.barrier
  schedule.phase "b.o_proj" {
    schedule.w4a16_gemv "b.o_proj" {count = 4 : i64, reads = [@b.o], accumulates = [@b.acc], epilogue = "atomic_f32", input = @b.o, input_offset = 0 : i64, outputs = [@b.acc], group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, n = [256], tn = 128 : i64, weights = ["b.o_proj"]}
  }
  schedule.barrier
  schedule.phase "c.delta" {
    schedule.kda_head_chunk "c.delta" {count = 16 : i64, reads = [@q, @g, @beta, @cq, @S], writes = [@S, @c.o], q = @q, k = @q, v = @q, g = @g, beta = @beta, o = @c.o, S = @S, cq = @cq, ck = @cq, cv = @cq, conv_w = "conv_w", conv = 4 : i64, head_dim = 128 : i64, heads = 2 : i64, chunk = 16 : i64}
  }
  schedule.barrier
  schedule.phase "c.o_proj" {
    schedule.w4a16_gemv "c.o_proj" {count = 2 : i64, reads = [@c.o], writes = [@c.y], epilogue = "bf16", input = @c.o, input_offset = 0 : i64, outputs = [@c.y], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, n = [256], tn = 128 : i64, weights = ["c.o_proj"]}
  }
  schedule.barrier
  schedule.phase "after" {
    schedule.zero_f32 "after" {count = 1 : i64, writes = [@b.acc], buffer = @b.acc, n = 256 : i64}
  }
}
