// RUN: mk-opt %s "--schedule-fuse-argmax=enabled=true" | FileCheck %s
// RUN: mk-opt %s --schedule-fuse-argmax | FileCheck %s
// RUN: mk-opt %s "--schedule-fuse-argmax=enabled=false" | FileCheck %s --check-prefix=OFF
// RUN: mk-opt %s "--schedule-fuse-argmax=enabled=true" --schedule-barriers-to-counters | FileCheck %s --check-prefix=COUNTERS

// On by default (enabled=false keeps the argmax task). Model a: the LM head's tiles (ksplit 1) store the logits the
// argmax reads: the GEMV takes the argmax's output and scratch, and the
// argmax task, its phase and the barrier in front of it go.
// CHECK-LABEL: schedule.kernel @k
// CHECK: schedule.phase "a.head"
// CHECK-NEXT: schedule.w4a16_gemv "a.head" {argmax_output = @a.next, argmax_scratch = @a.scratch,
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NOT: "a.argmax"
// Model b: the logits are also written by another task: the argmax stays.
// CHECK: schedule.argmax "b.argmax"
// Model c: the head is split-K (fp32 sums): the argmax stays.
// CHECK: schedule.argmax "c.argmax"
// Model d: the argmax's n is not the GEMV's columns: the argmax stays.
// CHECK: schedule.argmax "d.argmax"
// Model e: the scratch is zeroed between the head and the argmax (the
// tiles would merge into it before): the argmax stays.
// CHECK: schedule.argmax "e.argmax"
// OFF: schedule.argmax "a.argmax"
// OFF-NOT: argmax_output
// The folded head's tiles wait for the scratch's zeroing (they merge into
// it now), and nothing waits for them: no counter of theirs.
// COUNTERS-NOT: @a.head.done
// COUNTERS: schedule.w4a16_gemv "a.head"
// COUNTERS-NEXT: schedule.wait @a.scratch.zero.done {divisor = 4 : i64, target = 1 : i64, task = "a.head"}
// COUNTERS-NOT: @a.head.done
// COUNTERS-NOT: task = "a.argmax"
// COUNTERS: schedule.argmax "b.argmax"
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @a.logits {dtype = "bf16", shape = array<i64: 512>}
  schedule.buffer @a.next {dtype = "i32", shape = array<i64: 1>, space = "io"}
  schedule.buffer @a.scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @b.logits {dtype = "bf16", shape = array<i64: 512>}
  schedule.buffer @b.next {dtype = "i32", shape = array<i64: 1>, space = "io"}
  schedule.buffer @b.scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @c.logits {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @c.next {dtype = "i32", shape = array<i64: 1>, space = "io"}
  schedule.buffer @c.scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @d.logits {dtype = "bf16", shape = array<i64: 512>}
  schedule.buffer @d.next {dtype = "i32", shape = array<i64: 1>, space = "io"}
  schedule.buffer @d.scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.buffer @e.logits {dtype = "bf16", shape = array<i64: 512>}
  schedule.buffer @e.next {dtype = "i32", shape = array<i64: 1>, space = "io"}
  schedule.buffer @e.scratch {dtype = "f32", shape = array<i64: 4>}
  schedule.weight @head.w_q {dtype = "u8", shape = array<i64: 128, 512>, group = 128 : i64}
  schedule.weight @head.scales {dtype = "bf16", shape = array<i64: 2, 512>, group = 128 : i64}
  schedule.weight @head.zeros {dtype = "bf16", shape = array<i64: 2, 512>, group = 128 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "a.scratch.zero" {count = 1 : i64, buffer = @a.scratch, n = 4 : i64}
    schedule.zero_f32 "b.scratch.zero" {count = 1 : i64, buffer = @b.scratch, n = 4 : i64}
    schedule.zero_f32 "c.scratch.zero" {count = 1 : i64, buffer = @c.scratch, n = 4 : i64}
    schedule.zero_f32 "c.logits.zero" {count = 1 : i64, buffer = @c.logits, n = 512 : i64}
    schedule.zero_f32 "d.scratch.zero" {count = 1 : i64, buffer = @d.scratch, n = 4 : i64}
  }
  schedule.barrier
  schedule.phase "a.head" {
    schedule.w4a16_gemv "a.head" {bytes = 33792 : i64, count = 4 : i64, input = @x, input_offset = 0 : i64, outputs = [@a.logits], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, tiles = 4 : i64, n = [512], tn = 128 : i64, weights = ["head"]}
  }
  schedule.barrier
  schedule.phase "a.argmax" {
    schedule.argmax "a.argmax" {count = 2 : i64, input = @a.logits, output = @a.next, scratch = @a.scratch, n = 512 : i64}
  }
  schedule.barrier
  schedule.phase "b.bias" {
    schedule.opaque "b.bias" {count = 1 : i64, reads = [@x], writes = [@b.logits]}
  }
  schedule.barrier
  schedule.phase "b.head" {
    schedule.w4a16_gemv "b.head" {count = 4 : i64, input = @x, input_offset = 0 : i64, outputs = [@b.logits], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, tiles = 4 : i64, n = [512], tn = 128 : i64, weights = ["head"]}
  }
  schedule.barrier
  schedule.phase "b.argmax" {
    schedule.argmax "b.argmax" {count = 2 : i64, input = @b.logits, output = @b.next, scratch = @b.scratch, n = 512 : i64}
  }
  schedule.barrier
  schedule.phase "c.head" {
    schedule.w4a16_gemv "c.head" {count = 8 : i64, input = @x, input_offset = 0 : i64, outputs = [@c.logits], epilogue = "atomic_f32", group = 128 : i64, k = 256 : i64, ksplit = 2 : i64, tiles = 4 : i64, n = [512], tn = 128 : i64, weights = ["head"]}
  }
  schedule.barrier
  schedule.phase "c.argmax" {
    schedule.argmax "c.argmax" {count = 2 : i64, input = @c.logits, output = @c.next, scratch = @c.scratch, n = 512 : i64}
  }
  schedule.barrier
  schedule.phase "d.head" {
    schedule.w4a16_gemv "d.head" {count = 4 : i64, input = @x, input_offset = 0 : i64, outputs = [@d.logits], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, tiles = 4 : i64, n = [512], tn = 128 : i64, weights = ["head"]}
  }
  schedule.barrier
  schedule.phase "d.argmax" {
    schedule.argmax "d.argmax" {count = 2 : i64, input = @d.logits, output = @d.next, scratch = @d.scratch, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "e.head" {
    schedule.w4a16_gemv "e.head" {count = 4 : i64, input = @x, input_offset = 0 : i64, outputs = [@e.logits], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, tiles = 4 : i64, n = [512], tn = 128 : i64, weights = ["head"]}
  }
  schedule.barrier
  schedule.phase "e.zero" {
    schedule.zero_f32 "e.scratch.zero" {count = 1 : i64, buffer = @e.scratch, n = 4 : i64}
  }
  schedule.barrier
  schedule.phase "e.argmax" {
    schedule.argmax "e.argmax" {count = 2 : i64, input = @e.logits, output = @e.next, scratch = @e.scratch, n = 512 : i64}
  }
}
