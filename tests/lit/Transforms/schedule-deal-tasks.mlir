// RUN: mk-opt %s -split-input-file --schedule-deal-tasks | FileCheck %s
// RUN: mk-opt %s -split-input-file "--schedule-deal-tasks=continue=false" | FileCheck %s --check-prefix=RESTART

// Each phase's deal_offset is the number of grid task instances of the
// kernel's earlier phases (every_block tasks run in every block and are not
// dealt); with continue=false every phase deals from block 0.
// CHECK-LABEL: schedule.kernel @k
// CHECK: schedule.phase "p0" {
// CHECK: schedule.phase "p1" attributes {deal_offset = 400 : i64} {
// CHECK: schedule.phase "p2" attributes {deal_offset = 544 : i64} {
// RESTART-LABEL: schedule.kernel @k
// RESTART-NOT: deal_offset
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.phase "p0" {
    schedule.opaque "n" {partition = #schedule.partition<every_block>, count = 1 : i64}
    schedule.opaque "gate_up" {count = 256 : i64}
    schedule.opaque "shared_down" {count = 144 : i64}
  }
  schedule.phase "p1" {
    schedule.opaque "down" {count = 144 : i64}
  }
  schedule.barrier
  schedule.phase "p2" {
    schedule.opaque "next" {count = 8 : i64}
  }
}

// -----

// Offsets restart in every kernel of a module.
// CHECK-LABEL: schedule.kernel @a
// CHECK: schedule.phase "a1" attributes {deal_offset = 3 : i64} {
// CHECK-LABEL: schedule.kernel @b
// CHECK: schedule.phase "b0" {
// CHECK: schedule.phase "b1" attributes {deal_offset = 5 : i64} {
schedule.kernel @a attributes {threads = 256 : i64} {
  schedule.phase "a0" {
    schedule.opaque "x" {count = 3 : i64}
  }
  schedule.phase "a1" {
    schedule.opaque "y" {count = 1 : i64}
  }
}
schedule.kernel @b attributes {threads = 256 : i64} {
  schedule.phase "b0" {
    schedule.opaque "x" {count = 5 : i64}
  }
  schedule.phase "b1" {
    schedule.opaque "y" {count = 1 : i64}
  }
}
