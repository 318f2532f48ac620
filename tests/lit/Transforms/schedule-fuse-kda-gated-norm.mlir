// RUN: mk-opt %s "--schedule-fuse-kda-gated-norm=enabled=true" | FileCheck %s
// RUN: mk-opt %s --schedule-fuse-kda-gated-norm | FileCheck %s --check-prefix=OFF
// RUN: mk-opt %s "--schedule-fuse-kda-gated-norm=enabled=true" --schedule-barriers-to-counters | FileCheck %s --check-prefix=WAITS

// Opt-in. Layer a: the projection's k-slices (256 / ksplit 2) are whole
// heads of 128: the GEMV stages the norm of o itself (gated_norm_*), its
// input becomes o, z leaves its listed reads; the norm task, its phase,
// the barrier in front of it and the z buffer go.
// CHECK-LABEL: schedule.kernel @k
// CHECK-NOT: @a.z
// CHECK: schedule.buffer @b.z
// CHECK: schedule.phase "a.delta"
// CHECK-NEXT: schedule.opaque "a.delta"
// CHECK-NEXT: schedule.opaque "a.gate"
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "a.o_proj"
// CHECK-NEXT: schedule.w4a16_gemv "a.o_proj" {{{.*}}bytes = 33280 : i64{{.*}}gated_norm_eps = 1.000000e-05 : f64, gated_norm_gate = @a.gate, gated_norm_head_dim = 128 : i64, gated_norm_weight = "a.o_norm"{{.*}}input = @a.o,
// CHECK-NOT: @a.z
// Layer b: slices of 64 (ksplit 4) are half heads: the norm stays.
// CHECK: schedule.kda_gated_norm "b.norm"
// CHECK: schedule.w4a16_gemv "b.o_proj" {{{.*}}input = @b.z
// CHECK-NOT: gated_norm
// Layer c: z read by a second task: the norm stays.
// CHECK: schedule.kda_gated_norm "c.norm"
// CHECK: schedule.w4a16_gemv "c.o_proj" {{{.*}}input = @c.z
// OFF: schedule.kda_gated_norm "a.norm"
// OFF-NOT: gated_norm_gate
// The fused GEMV waits for the gated delta (o) and the gate's producer.
// WAITS: schedule.wait @a.delta.done {divisor = 4 : i64, target = 8 : i64, task = "a.o_proj"}
// WAITS-NEXT: schedule.wait @a.gate.done {divisor = 4 : i64, target = 2 : i64, task = "a.o_proj"}
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @a.o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @a.gate {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @a.z {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @a.acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @b.z {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @b.acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @c.z {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @c.acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @c.y {dtype = "bf16", shape = array<i64: 256>}
  schedule.weight @a.o_norm {dtype = "bf16", shape = array<i64: 128>}
  schedule.weight @a.o_proj.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.weight @a.o_proj.scales {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.weight @a.o_proj.zeros {dtype = "bf16", shape = array<i64: 2, 256>, group = 128 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "a.acc.zero" {count = 1 : i64, buffer = @a.acc, n = 256 : i64}
    schedule.zero_f32 "b.acc.zero" {count = 1 : i64, buffer = @b.acc, n = 256 : i64}
    schedule.zero_f32 "c.acc.zero" {count = 1 : i64, buffer = @c.acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "a.delta" {
    schedule.opaque "a.delta" {count = 8 : i64, reads = [@x], writes = [@a.o]}
    schedule.opaque "a.gate" {count = 2 : i64, reads = [@x], writes = [@a.gate]}
  }
  schedule.barrier
  schedule.phase "a.norm" {
    schedule.kda_gated_norm "a.norm" {bytes = 1536 : i64, count = 2 : i64, input = @a.o, gate = @a.gate, output = @a.z, weight = "a.o_norm", heads = 2 : i64, head_dim = 128 : i64, eps = 1.0e-05 : f64}
  }
  schedule.barrier
  schedule.phase "a.o_proj" {
    schedule.w4a16_gemv "a.o_proj" {bytes = 32768 : i64, count = 4 : i64, reads = [@a.z], accumulates = [@a.acc], epilogue = "atomic_f32", input = @a.z, input_offset = 0 : i64, outputs = [@a.acc], group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, n = [256], tn = 128 : i64, weights = ["a.o_proj"]}
  }
  schedule.barrier
  schedule.phase "b.norm" {
    schedule.kda_gated_norm "b.norm" {count = 2 : i64, input = @a.o, gate = @a.gate, output = @b.z, weight = "a.o_norm", heads = 2 : i64, head_dim = 128 : i64, eps = 1.0e-05 : f64}
  }
  schedule.barrier
  schedule.phase "b.o_proj" {
    schedule.w4a16_gemv "b.o_proj" {count = 8 : i64, accumulates = [@b.acc], epilogue = "atomic_f32", input = @b.z, input_offset = 0 : i64, outputs = [@b.acc], group = 128 : i64, k = 256 : i64, ksplit = 4 : i64, n = [256], tn = 128 : i64, weights = ["a.o_proj"]}
  }
  schedule.barrier
  schedule.phase "c.norm" {
    schedule.kda_gated_norm "c.norm" {count = 2 : i64, input = @a.o, gate = @a.gate, output = @c.z, weight = "a.o_norm", heads = 2 : i64, head_dim = 128 : i64, eps = 1.0e-05 : f64}
  }
  schedule.barrier
  schedule.phase "c.o_proj" {
    schedule.w4a16_gemv "c.o_proj" {count = 4 : i64, accumulates = [@c.acc], epilogue = "atomic_f32", input = @c.z, input_offset = 0 : i64, outputs = [@c.acc], group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, n = [256], tn = 128 : i64, weights = ["a.o_proj"]}
    schedule.opaque "c.also" {count = 1 : i64, reads = [@c.z], writes = [@c.y]}
  }
}
