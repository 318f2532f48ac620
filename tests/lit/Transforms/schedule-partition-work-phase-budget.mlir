// RUN: mk-opt %s "--schedule-partition-work=target-sms=8 balance-phases=false" | FileCheck %s
// RUN: mk-opt %s "--schedule-partition-work=target-sms=8 balance-phases=false phase-budget=false" | FileCheck %s --check-prefix=OFF
// The pass run again on its own output gives the same cuts.
// RUN: mk-opt %s "--schedule-partition-work=target-sms=8 balance-phases=false" | mk-opt "--schedule-partition-work=target-sms=8 balance-phases=false" | FileCheck %s

// phase-budget (on by default): a task is cut for the blocks its phase's
// earlier tasks leave (target-sms less their instances, at least a quarter
// of it), not for the whole grid. On 8 blocks "first" takes 8 instances
// (split-K 8); "second", the same product, is then cut for the quarter
// left, 2 blocks (split-K 2: 2 instances, so no block runs two of the
// phase's tasks), where without the budget it also takes 8 and every block
// runs two.
// CHECK-LABEL: schedule.kernel @budget
// CHECK: schedule.w4a16_gemv "first" {{{.*}}count = 8 : i64{{.*}}ksplit = 8 : i64
// CHECK: schedule.w4a16_gemv "second" {{{.*}}count = 2 : i64{{.*}}ksplit = 2 : i64
// OFF-LABEL: schedule.kernel @budget
// OFF: schedule.w4a16_gemv "first" {{{.*}}count = 8 : i64{{.*}}ksplit = 8 : i64
// OFF: schedule.w4a16_gemv "second" {{{.*}}count = 8 : i64{{.*}}ksplit = 8 : i64
schedule.kernel @budget attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 2048, 128>, group = 128 : i64}
  schedule.weight @v.w_q {dtype = "u8", shape = array<i64: 2048, 128>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 128>}
  schedule.buffer @acc2 {dtype = "f32", shape = array<i64: 128>}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 128 : i64}
    schedule.zero_f32 "acc2.zero" {buffer = @acc2, n = 128 : i64}
  }
  schedule.barrier
  schedule.phase "proj" {
    schedule.w4a16_gemv "first" {epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 4096 : i64, n = [128], outputs = [@acc], weights = ["w"]}
    schedule.w4a16_gemv "second" {epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 4096 : i64, n = [128], outputs = [@acc2], weights = ["v"]}
  }
}
