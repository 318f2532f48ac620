// RUN: mk-opt %s | mk-opt | FileCheck %s

// CHECK-LABEL: schedule.kernel @k
// CHECK-SAME: config = {hidden = 64 : i64, name = "k"}, num_layers = 1 : i64
schedule.kernel @k attributes {threads = 128 : i64, config = {hidden = 64 : i64, name = "k"}, num_layers = 1 : i64} {
  // CHECK: schedule.weight @l0.proj.w_q {dtype = "u8", group = 32 : i64, shape = array<i64: 32, 64>}
  schedule.weight @l0.proj.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  // CHECK: schedule.weight @l0.norm {dtype = "bf16", shape = array<i64: 64>}
  schedule.weight @l0.norm {dtype = "bf16", shape = array<i64: 64>, group = 0 : i64}
  schedule.buffer @in {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>}
  schedule.counter @ready {size = 4 : i64}
  // CHECK: schedule.phase "produce"
  schedule.phase "produce" {
    // A task's arguments are its op's attributes, printed with the others.
    // CHECK: schedule.w4a16_gemv "p" {count = 8 : i64, group = 32 : i64, input = @in, k = 64 : i64, n = [64], outputs = [@x], reads = [@in], weights = ["l0.proj"], writes = [@x]}
    schedule.w4a16_gemv "p" {count = 8 : i64, reads = [@in], writes = [@x],
                       weights = ["l0.proj"], outputs = [@x], n = [64], k = 64, group = 32, input = @in}
    // CHECK: schedule.signal @ready {divisor = 2 : i64, task = "p"}
    schedule.signal @ready {task = "p", divisor = 2 : i64}
  }
  schedule.phase "consume" {
    schedule.opaque "c" {count = 4 : i64, reads = [@x]}
    // CHECK: schedule.wait @ready {target = 2 : i64, task = "c"}
    schedule.wait @ready {task = "c", target = 2 : i64}
  }
  // CHECK: schedule.barrier
  schedule.barrier
  schedule.phase "after" {
    schedule.opaque "a" {reads = [@x]}
  }
}
