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
    schedule.opaque "n" {partition = "every_block", count = 1 : i64}
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

// -----

// claim=true: a phase of waiting tasks that fills at most 90% of the grid
// (here 200 of 264 blocks) claims its instances from a new counter of size
// 1, placed with the other counters before the first phase; a phase that
// fills the grid (264), has an every-block task, or a task that waits on
// nothing keeps the deal.
// RUN: mk-opt %s -split-input-file "--schedule-deal-tasks=claim=true" | FileCheck %s --check-prefix=CLAIM
// CLAIM-LABEL: schedule.kernel @c
// CLAIM: schedule.counter @gu.ready {size = 8 : i64}
// CLAIM-NEXT: schedule.counter @down.claim {size = 1 : i64}
// CLAIM-NEXT: schedule.phase "gu" {
// CLAIM: schedule.phase "down" attributes {claim = @down.claim, deal_offset = 264 : i64} {
// CLAIM: schedule.phase "full" attributes {deal_offset = 464 : i64} {
// CLAIM: schedule.phase "normed" attributes {deal_offset = 728 : i64} {
// CLAIM: schedule.phase "free" attributes {deal_offset = 928 : i64} {
schedule.kernel @c attributes {threads = 256 : i64, target_sms = 264 : i64} {
  schedule.counter @gu.ready {size = 8 : i64}
  schedule.phase "gu" {
    schedule.opaque "gate_up" {count = 264 : i64}
    schedule.signal @gu.ready {task = "gate_up", divisor = 33 : i64}
  }
  schedule.phase "down" {
    schedule.opaque "down" {count = 200 : i64}
    schedule.wait @gu.ready {task = "down", divisor = 25 : i64, target = 33 : i64}
  }
  schedule.phase "full" {
    schedule.opaque "full" {count = 264 : i64}
    schedule.wait @gu.ready {task = "full", divisor = 33 : i64, target = 33 : i64}
  }
  schedule.phase "normed" {
    schedule.opaque "n" {partition = "every_block", count = 1 : i64}
    schedule.opaque "after_norm" {count = 200 : i64}
    schedule.wait @gu.ready {task = "after_norm", divisor = 25 : i64, target = 33 : i64}
  }
  schedule.phase "free" {
    schedule.opaque "free" {count = 8 : i64}
  }
}
