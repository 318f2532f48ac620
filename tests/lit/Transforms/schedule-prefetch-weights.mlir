// RUN: mk-opt %s "--schedule-prefetch-weights=distance=1 streams=true" | FileCheck %s
// RUN: mk-opt %s "--schedule-prefetch-weights=distance=2" | FileCheck %s --check-prefix=D2
// RUN: mk-opt %s --schedule-prefetch-weights | FileCheck %s --check-prefix=OFF
// RUN: not mk-opt %s "--schedule-prefetch-weights=distance=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: mk-opt %s "--schedule-prefetch-weights=distance=1" | FileCheck %s --check-prefix=NOSTREAMS
// RUN: mk-opt %s "--schedule-prefetch-weights=norm-free-streams=true" | FileCheck %s --check-prefix=NORMFREE
// RUN: mk-opt %s "--schedule-prefetch-weights=l2-first-tasks=true" | FileCheck %s --check-prefix=FIRST
// RUN: mk-opt %s "--schedule-prefetch-weights=tile-stages-ahead=0" | FileCheck %s --check-prefix=WHOLE
// RUN: mk-opt %s "--schedule-prefetch-weights=routed-tasks-l2=true" | FileCheck %s --check-prefix=ROUTED
// RUN: not mk-opt %s "--schedule-prefetch-weights=tile-stages-ahead=-1" 2>&1 | FileCheck %s --check-prefix=BADAHEAD
// RUN: not mk-opt %s "--schedule-prefetch-weights=tile-stages-ahead=1" 2>&1 | FileCheck %s --check-prefix=ONEAHEAD

// Each phase names the data-independent weights of the phase `distance`
// later (the first phase also its own and those in between): every weight
// a task's arguments name (the registry of task kinds says which), e.g.
// GEMV, bf16-row and norm weights, shared experts, MLA's W_kv_b; never
// routed experts.
// Off by default (distance=0: measured slower).
// With streams=true weight streams start at phase entry (off by default).
// CHECK: schedule.kernel @k attributes {early_weight_streams,
// CHECK-SAME: tile_stages_ahead = 2
// A grouped packed tile asks for 2 stages of its weight ring before its
// first steps by default (tile-stages-ahead), the whole ring with 0:
// OFF-NOT: early_weight_streams
// OFF: tile_stages_ahead = 2
// (0, the attribute's default, is not printed)
// WHOLE: schedule.kernel @k attributes {threads = 256 : i64} {
// BADAHEAD: schedule-prefetch-weights: tile-stages-ahead must be 0 (the whole ring) or at least 2, got -1
// One stage ahead is refused (ptxas 13.0 miscompiles the tile so):
// ONEAHEAD: schedule-prefetch-weights: tile-stages-ahead must be 0 (the whole ring) or at least 2, got 1
// With norm-free-streams=true only the phases without an every-block norm
// start them (p1 has one):
// NORMFREE-NOT: schedule.kernel @k attributes {early_weight_streams
// NORMFREE: schedule.phase "p0" attributes {early_weight_streams}
// NORMFREE: schedule.phase "p1" {
// NORMFREE: schedule.phase "p2" attributes {early_weight_streams}
// NORMFREE: schedule.phase "p3" attributes {early_weight_streams}
// NOSTREAMS-NOT: early_weight_streams
// OFF-NOT: early_weight_streams
// OFF-NOT: l2_first_tasks
// CHECK: schedule.phase "p0" attributes {l2_prefetch = ["wq", "wbeta", "n1", "wo"]}
// CHECK: schedule.phase "p1" attributes {l2_prefetch = ["sgate", "sup"]}
// With l2-first-tasks=true (off by default: measured slower, #81) the phases
// with an every-block norm (p1 only) ask L2 for their blocks' first
// instances' weights at entry:
// FIRST-NOT: l2_first_tasks
// FIRST: schedule.phase "p1" attributes {l2_first_tasks} {
// FIRST-NOT: l2_first_tasks
// With routed-tasks-l2=true the phases of routed MoE down tiles (p2 only;
// p1's routed gate/up tiles and p2's shared ones do not mark a phase) get
// l2_routed_tasks: a block asks L2 for its routed down tile there once it
// has computed the router's top-k in an earlier phase.
// ROUTED-NOT: l2_routed_tasks
// ROUTED: schedule.phase "p2" attributes {l2_routed_tasks} {
// ROUTED-NOT: l2_routed_tasks
// OFF-NOT: l2_routed_tasks
// CHECK: schedule.phase "p2" attributes {l2_prefetch = ["kvb"]}
// CHECK: schedule.phase "p3" {
// D2: schedule.phase "p0" attributes {l2_prefetch = ["wq", "wbeta", "n1", "wo", "sgate", "sup"]}
// D2: schedule.phase "p1" attributes {l2_prefetch = ["kvb"]}
// D2: schedule.phase "p2" {
// OFF-NOT: l2_prefetch
// BAD: schedule-prefetch-weights: distance must be >= 0, got -1
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @wq.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.weight @wbeta {dtype = "bf16", shape = array<i64: 4, 256>}
  schedule.weight @wo.w_q {dtype = "u8", shape = array<i64: 128, 256>, group = 128 : i64}
  schedule.weight @rgate.w_q {dtype = "u8", shape = array<i64: 64, 128, 128>, group = 128 : i64}
  schedule.weight @rup.w_q {dtype = "u8", shape = array<i64: 64, 128, 128>, group = 128 : i64}
  schedule.weight @sgate.w_q {dtype = "u8", shape = array<i64: 1, 128, 128>, group = 128 : i64}
  schedule.weight @sup.w_q {dtype = "u8", shape = array<i64: 1, 128, 128>, group = 128 : i64}
  schedule.weight @rdown.w_q {dtype = "u8", shape = array<i64: 64, 64, 256>, group = 128 : i64}
  schedule.weight @kvb.w_q {dtype = "u8", shape = array<i64: 256, 512>, group = 128 : i64}
  schedule.weight @n1 {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 4>}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.buffer @ssums {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @qa {dtype = "f32", shape = array<i64: 1024>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.phase "p0" {
    schedule.w4a16_gemv "q" {count = 4 : i64, reads = [@x], writes = [@q],
                       weights = ["wq"], outputs = [@q], n = [256], k = 256 : i64, group = 128 : i64, input = @x}
    schedule.bf16_rows "beta" {count = 4 : i64, reads = [@x], writes = [@beta],
                          weight = "wbeta", output = @beta, k = 256 : i64, rows = 4 : i64}
    schedule.zero_f32 "sums.zero" {writes = [@sums], buffer = @sums, n = 512 : i64}
    schedule.zero_f32 "ssums.zero" {writes = [@ssums], buffer = @ssums, n = 256 : i64}
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@x], writes = [@xs],
                          base = @x, weight = "n1", dim = 256 : i64, eps = 1.0e-06 : f64, xs = @xs}
    schedule.w4a16_gemv "o" {count = 4 : i64, reads = [@q], writes = [@o],
                       weights = ["wo"], outputs = [@o], n = [256], k = 256 : i64, group = 128 : i64, input = @q}
    // Routed experts: chosen at run time, not prefetched.
    schedule.moe_gate_up "moe" {count = 4 : i64, reads = [@x, @logits], accumulates = [@sums],
                         experts = 64 : i64, gate = "rgate", up = "rup", sums = @sums, logits = @logits,
                         hidden = 256 : i64, inter = 128 : i64, slots = 2 : i64, group = 128 : i64,
                         top_k = 2 : i64, scaling = 1.0 : f64}
  }
  schedule.barrier
  schedule.phase "p2" {
    schedule.moe_gate_up "shared" {count = 4 : i64, reads = [@x], accumulates = [@ssums],
                            experts = 1 : i64, gate = "sgate", up = "sup", sums = @ssums,
                            hidden = 256 : i64, inter = 128 : i64, slots = 1 : i64, group = 128 : i64}
    schedule.moe_down "down" {count = 4 : i64, reads = [@sums, @logits], accumulates = [@acc],
                          experts = 64 : i64, down = "rdown", sums = @sums, acc = @acc, logits = @logits,
                          hidden = 256 : i64, inter = 128 : i64, slots = 2 : i64, group = 128 : i64,
                          top_k = 2 : i64, scaling = 1.0 : f64}
  }
  schedule.barrier
  schedule.phase "p3" {
    schedule.mla_q_absorb "absorb" {count = 4 : i64, reads = [@q], writes = [@qa],
                            kv_b = "kvb", q = @q, q_abs = @qa, nope = 128 : i64, lora = 512 : i64,
                            heads = 2 : i64, v_head = 128 : i64, rope = 64 : i64}
  }
}
