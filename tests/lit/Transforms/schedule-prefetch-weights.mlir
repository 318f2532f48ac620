// RUN: mk-opt %s "--schedule-prefetch-weights=distance=1 streams=true" | FileCheck %s
// RUN: mk-opt %s "--schedule-prefetch-weights=distance=2" | FileCheck %s --check-prefix=D2
// RUN: mk-opt %s --schedule-prefetch-weights | FileCheck %s --check-prefix=OFF
// RUN: not mk-opt %s "--schedule-prefetch-weights=distance=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: mk-opt %s "--schedule-prefetch-weights=distance=1" | FileCheck %s --check-prefix=NOSTREAMS

// Each phase names the data-independent weights of the phase `distance`
// later (the first phase also its own and those in between): GEMV and
// bf16-row weights, shared experts, MLA's W_kv_b; never routed experts.
// Off by default (distance=0: measured slower).
// With streams=true weight streams start at phase entry (off by default).
// CHECK: schedule.kernel @k attributes {early_weight_streams,
// NOSTREAMS-NOT: early_weight_streams
// OFF-NOT: early_weight_streams
// CHECK: schedule.phase "p0" attributes {l2_prefetch = ["wq", "wbeta", "wo"]}
// CHECK: schedule.phase "p1" attributes {l2_prefetch = ["sgate", "sup"]}
// CHECK: schedule.phase "p2" attributes {l2_prefetch = ["kvb"]}
// CHECK: schedule.phase "p3" {
// D2: schedule.phase "p0" attributes {l2_prefetch = ["wq", "wbeta", "wo", "sgate", "sup"]}
// D2: schedule.phase "p1" attributes {l2_prefetch = ["kvb"]}
// D2: schedule.phase "p2" {
// OFF-NOT: l2_prefetch
// BAD: schedule-prefetch-weights: distance must be >= 0, got -1
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.phase "p0" {
    schedule.task "q" {kind = "w4a16_gemv", count = 4 : i64, args = {weights = ["wq"]}}
    schedule.task "beta" {kind = "bf16_rows", count = 4 : i64, args = {weight = "wbeta"}}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.task "o" {kind = "w4a16_gemv", count = 4 : i64, args = {weights = ["wo"]}}
    // Routed experts: chosen at run time, not prefetched.
    schedule.task "moe" {kind = "moe_gate_up", count = 4 : i64, args = {experts = 64 : i64, gate = "rgate", up = "rup"}}
  }
  schedule.barrier
  schedule.phase "p2" {
    schedule.task "shared" {kind = "moe_gate_up", count = 4 : i64, args = {experts = 1 : i64, gate = "sgate", up = "sup"}}
    schedule.task "down" {kind = "moe_down", count = 4 : i64, args = {experts = 64 : i64, down = "rdown"}}
  }
  schedule.barrier
  schedule.phase "p3" {
    schedule.task "absorb" {kind = "mla_q_absorb", count = 4 : i64, args = {kv_b = "kvb"}}
  }
}
