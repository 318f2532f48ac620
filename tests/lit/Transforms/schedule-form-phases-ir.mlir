// RUN: mk-opt %s -split-input-file -verify-diagnostics --schedule-form-phases | FileCheck %s
// RUN: mk-opt %s -split-input-file -verify-diagnostics "--schedule-form-phases=threads=1024 max-shared-bytes=0 debug-capture=true" | FileCheck %s --check-prefix=OPTS
// RUN: sed -e 's/^module @unit /module /' %s | mk-opt -split-input-file -verify-diagnostics "--schedule-form-phases=kernel-name=step_k" | FileCheck %s --check-prefix=NAMED
// RUN: sed -e 's/^module @unit /module /' %s | not mk-opt -split-input-file --schedule-form-phases 2>&1 | FileCheck %s --check-prefix=NONAME
// RUN: sed -e 's/^module @unit /module @"2unit" /' %s | not mk-opt -split-input-file --schedule-form-phases 2>&1 | FileCheck %s --check-prefix=NONAME
// RUN: not mk-opt %s -split-input-file "--schedule-form-phases=threads=48" 2>&1 | FileCheck %s --check-prefix=BAD-THREADS48
// RUN: not mk-opt %s -split-input-file "--schedule-form-phases=threads=1056" 2>&1 | FileCheck %s --check-prefix=BAD-THREADS1056
// RUN: not mk-opt %s -split-input-file "--schedule-form-phases=max-shared-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BAD-SHARED
// RUN: not mk-opt %s -split-input-file "--schedule-form-phases=kernel-name=2step" 2>&1 | FileCheck %s --check-prefix=BAD-NAME

// schedule-form-phases on hand-written graph modules (after
// graph-fuse-projections and graph-absorb-mla: their marks are written
// here by hand). The module becomes one schedule.kernel: @mk_<module name>
// (or kernel-name), the module's `mk.config` as `config`, `num_layers` one
// past the highest `layer` of the weight and state symbols (copied onto the
// schedule.weight ops and state buffers; @spare has none), a schedule.weight
// per graph.weight and three per graph.quantized_weight (w_q u8 [.., in/2, out], scales and
// zeros bf16 [.., in/group, out], with the group), a buffer per value
// (state ones from the step's arguments, checked against the graph.state
// symbols), and the tasks placed ASAP: a norm feeds its consumers through
// shared memory in its own phase, any other dependency crosses a barrier.
// The cases: one KDA + MoE layer, two layers of norm + o_proj (the
// residual folded into the next norm, zeroing hoisted to the first phase),
// one MLA layer, one GQA layer, a module already lowered, the options, and the lowering's
// errors.
//
// NONAME: error: schedule-form-phases: the graph module needs a C-identifier name (mk_<name> is the kernel's), or pass kernel-name
// BAD-THREADS48: error: schedule-form-phases: threads must be a multiple of 32 in 32..1024, got 48
// BAD-THREADS1056: error: schedule-form-phases: threads must be a multiple of 32 in 32..1024, got 1056
// BAD-SHARED: error: schedule-form-phases: max-shared-bytes must be >= 0 (0: no limit), got -1
// BAD-NAME: error: schedule-form-phases: kernel-name must be a C identifier (letters, digits, '_', not starting with a digit), got '2step'

// One layer: KDA (q/k/v/g + beta fused, short convs folded into the KDA
// task, a conv_commit after it) and MoE (router, routed and shared
// experts). Attention projections use groups of 16, experts groups of 32.
// The graph symbols and the function are gone; the kernel's parameters
// are the symbols in their order.
// CHECK-LABEL: module @unit
// CHECK-NOT: {{graph\.|func\.func}}
// CHECK: schedule.kernel @mk_unit attributes {config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}, max_shared_bytes = 101376 : i64, num_layers = 1 : i64, threads = 256 : i64} {
// CHECK-NEXT: schedule.weight @blocks.0.attn_norm {dtype = "bf16", layer = 0 : i64, shape = array<i64: 64>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.q_proj.w_q {dtype = "u8", group = 16 : i64, layer = 0 : i64, shape = array<i64: 32, 16>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.q_proj.scales {dtype = "bf16", group = 16 : i64, layer = 0 : i64, shape = array<i64: 4, 16>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.q_proj.zeros {dtype = "bf16", group = 16 : i64, layer = 0 : i64, shape = array<i64: 4, 16>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.k_proj.w_q
// CHECK: schedule.weight @blocks.0.attn.g_proj.zeros
// CHECK-NEXT: schedule.weight @blocks.0.attn.beta_proj.weight {dtype = "bf16", layer = 0 : i64, shape = array<i64: 2, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.conv_w {dtype = "bf16", layer = 0 : i64, shape = array<i64: 3, 16, 4>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.o_proj.w_q {dtype = "u8", group = 16 : i64, layer = 0 : i64, shape = array<i64: 8, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.o_proj.scales {dtype = "bf16", group = 16 : i64, layer = 0 : i64, shape = array<i64: 1, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.attn.o_proj.zeros {dtype = "bf16", group = 16 : i64, layer = 0 : i64, shape = array<i64: 1, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.moe_norm {dtype = "bf16", layer = 0 : i64, shape = array<i64: 64>}
// CHECK-NEXT: schedule.weight @blocks.0.moe.router.weight {dtype = "bf16", layer = 0 : i64, shape = array<i64: 4, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.moe.gate.w_q {dtype = "u8", group = 32 : i64, layer = 0 : i64, shape = array<i64: 4, 32, 32>}
// CHECK-NEXT: schedule.weight @blocks.0.moe.gate.scales {dtype = "bf16", group = 32 : i64, layer = 0 : i64, shape = array<i64: 4, 2, 32>}
// CHECK-NEXT: schedule.weight @blocks.0.moe.gate.zeros {dtype = "bf16", group = 32 : i64, layer = 0 : i64, shape = array<i64: 4, 2, 32>}
// CHECK: schedule.weight @blocks.0.moe.s_down.w_q {dtype = "u8", group = 32 : i64, layer = 0 : i64, shape = array<i64: 1, 16, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.moe.s_down.scales {dtype = "bf16", group = 32 : i64, layer = 0 : i64, shape = array<i64: 1, 1, 64>}
// CHECK-NEXT: schedule.weight @blocks.0.moe.s_down.zeros {dtype = "bf16", group = 32 : i64, layer = 0 : i64, shape = array<i64: 1, 1, 64>}
// The hidden input, then the decode state in the arguments' order.
// CHECK-NEXT: schedule.buffer @hidden_in {dtype = "bf16", shape = array<i64: 64>, space = "io"}
// CHECK-NEXT: schedule.buffer @state.0.S {dtype = "f32", layer = 0 : i64, shape = array<i64: 2, 8, 8>, space = "state"}
// CHECK-NEXT: schedule.buffer @state.0.cq {dtype = "bf16", layer = 0 : i64, shape = array<i64: 3, 16>, space = "state"}
// CHECK-NEXT: schedule.buffer @state.0.ck {dtype = "bf16", layer = 0 : i64, shape = array<i64: 3, 16>, space = "state"}
// CHECK-NEXT: schedule.buffer @state.0.cv {dtype = "bf16", layer = 0 : i64, shape = array<i64: 3, 16>, space = "state"}
// CHECK-NEXT: schedule.buffer @blocks.0.attn_norm.out {dtype = "f32", shape = array<i64: 64>, space = "shared"}
// CHECK: schedule.buffer @blocks.0.moe.experts.gate_up_sums {dtype = "f32", shape = array<i64: 128>}
// CHECK-NEXT: schedule.buffer @blocks.0.moe.shared_experts.gate_up_sums {dtype = "f32", shape = array<i64: 64>}
// CHECK-NEXT: schedule.buffer @hidden_out {dtype = "bf16", shape = array<i64: 64>, space = "io"}
// The norm and the fused projections that read it from shared memory
// share a phase; the fp32 sums are zeroed in the first phase.
// CHECK-NEXT: schedule.phase "blocks.0.attn_norm" {
// CHECK-NEXT: schedule.residual_rmsnorm "blocks.0.attn_norm" {base = @hidden_in, dim = 64 : i64, eps = 9.9999999999999995E-7 : f64, op = "graph.rmsnorm", partition = #schedule.partition<every_block>, weight = "blocks.0.attn_norm", xs = @blocks.0.attn_norm.out}
// CHECK-NEXT: schedule.w4a16_gemv "blocks.0.attn.q_proj.group" {epilogue = "bf16", group = 16 : i64, input = @blocks.0.attn_norm.out, input_offset = 0 : i64, k = 64 : i64, n = [16, 16, 16, 16], op = "graph.linear_w4a16", outputs = [@blocks.0.attn.q_proj.out, @blocks.0.attn.k_proj.out, @blocks.0.attn.v_proj.out, @blocks.0.attn.g_proj.out], unit = "blocks.0.kda_head", unit_cols = 8 : i64, weights = ["blocks.0.attn.q_proj", "blocks.0.attn.k_proj", "blocks.0.attn.v_proj", "blocks.0.attn.g_proj"]}
// CHECK-NEXT: schedule.bf16_rows "blocks.0.attn.beta_proj.weight" {{{.*}}input = @blocks.0.attn_norm.out{{.*}}k = 64 : i64{{.*}}output = @blocks.0.attn.beta_proj.weight.out{{.*}}rows = 2 : i64{{.*}}unit = "blocks.0.kda_head"{{.*}}weight = "blocks.0.attn.beta_proj.weight"
// CHECK-NEXT: schedule.zero_f32 "blocks.0.attn.o_proj.acc.zero" {buffer = @blocks.0.attn.o_proj.acc, n = 64 : i64, partition = #schedule.partition<slices>}
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.moe.acc.zero"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.moe.experts.gate_up_sums.zero" {{{.*}}buffer = @blocks.0.moe.experts.gate_up_sums{{.*}}n = 128 : i64
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.moe.shared_experts.gate_up_sums.zero"
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.gated_delta" {
// CHECK-NEXT: schedule.kda_head_chunk "blocks.0.attn.gated_delta" {S = @state.0.S, beta = @blocks.0.attn.beta_proj.weight.out, ck = @state.0.ck, conv = 4 : i64, conv_w = "blocks.0.attn.conv_w", cq = @state.0.cq, cv = @state.0.cv, g = @blocks.0.attn.g_proj.out, head_dim = 8 : i64, heads = 2 : i64, k = @blocks.0.attn.k_proj.out, o = @blocks.0.attn.kda_o, op = "graph.kda_gated_delta", q = @blocks.0.attn.q_proj.out, unit = "blocks.0.kda_head", v = @blocks.0.attn.v_proj.out}
// CHECK-NEXT: {{^ +}$}}
// The windows shift once the KDA task has read them (a barrier after it);
// o_proj, also after the KDA output, runs in the same phase.
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.conv_commit" {
// CHECK-NEXT: schedule.conv_commit "blocks.0.attn.conv_commit" {{{.*}}channels = 16 : i64{{.*}}ck = @state.0.ck{{.*}}conv = 4 : i64{{.*}}cq = @state.0.cq{{.*}}cv = @state.0.cv{{.*}}op = "graph.kda_short_conv"
// CHECK-NEXT: schedule.w4a16_gemv "blocks.0.attn.o_proj" {{{.*}}epilogue = "atomic_f32"{{.*}}group = 16 : i64{{.*}}input = @blocks.0.attn.kda_o{{.*}}input_offset = 0 : i64{{.*}}k = 16 : i64{{.*}}n = [64]
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// The residual add is folded into the MoE norm, which stores the sum.
// CHECK-NEXT: schedule.phase "blocks.0.moe_norm" {
// CHECK-NEXT: schedule.residual_rmsnorm "blocks.0.moe_norm" {acc = @blocks.0.attn.o_proj.acc, base = @hidden_in, dim = 64 : i64, eps = 1.000000e-05 : f64, op = "graph.rmsnorm", out = @blocks.0.moe_norm.residual, partition = #schedule.partition<every_block>, weight = "blocks.0.moe_norm", xs = @blocks.0.moe_norm.out}
// CHECK-NEXT: schedule.bf16_rows "blocks.0.moe.router" {{{.*}}input = @blocks.0.moe_norm.out{{.*}}k = 64 : i64{{.*}}op = "graph.moe_router"{{.*}}output = @blocks.0.moe.router.logits{{.*}}rows = 4 : i64{{.*}}weight = "blocks.0.moe.router.weight"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.moe.shared_experts.gate_up" {{{.*}}experts = 1 : i64{{.*}}gate = "blocks.0.moe.s_gate"{{.*}}group = 32 : i64{{.*}}hidden = 64 : i64{{.*}}input = @blocks.0.moe_norm.out{{.*}}inter = 32 : i64{{.*}}slots = 1 : i64
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.moe.experts.gate_up" {
// CHECK-NEXT: schedule.moe_gate_up "blocks.0.moe.experts.gate_up" {experts = 4 : i64, gate = "blocks.0.moe.gate", group = 32 : i64, hidden = 64 : i64, input = @blocks.0.moe_norm.out, inter = 32 : i64, logits = @blocks.0.moe.router.logits, op = "graph.moe_experts", scaling = 2.500000e+00 : f64, slots = 2 : i64, sums = @blocks.0.moe.experts.gate_up_sums, top_k = 2 : i64, unit = "blocks.0.moe.experts.slot", up = "blocks.0.moe.up"}
// CHECK-NEXT: schedule.moe_down "blocks.0.moe.shared_experts.down" {{{.*}}op = "graph.shared_experts"
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.moe.experts.down" {
// CHECK-NEXT: schedule.moe_down "blocks.0.moe.experts.down" {{{.*}}op = "graph.moe_experts"
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "final_residual" {
// CHECK-NEXT: schedule.final_residual "final_residual" {acc = @blocks.0.moe.acc, base = @blocks.0.moe_norm.residual, dim = 64 : i64, op = "func.return", out = @hidden_out}
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: {{^}$}}
// The options: threads, max_shared_bytes 0 (no limit: the attribute's
// default, not printed), debug_capture.
// OPTS-LABEL: schedule.kernel @mk_unit attributes {config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}, debug_capture, num_layers = 1 : i64, threads = 1024 : i64} {
// A module without a name needs kernel-name.
// NAMED-LABEL: schedule.kernel @step_k attributes {config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}, max_shared_bytes = 101376 : i64, num_layers = 1 : i64, threads = 256 : i64} {
module @unit attributes {mk.config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}} {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16> layer 0
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4> layer 0
  graph.quantized_weight @blocks.0.attn.k_proj {group = 16} : tensor<64x16xi4> layer 0
  graph.quantized_weight @blocks.0.attn.v_proj {group = 16} : tensor<64x16xi4> layer 0
  graph.quantized_weight @blocks.0.attn.g_proj {group = 16} : tensor<64x16xi4> layer 0
  graph.weight @blocks.0.attn.beta_proj.weight : tensor<2x64xbf16> layer 0
  graph.weight @blocks.0.attn.conv_w : tensor<3x16x4xbf16> layer 0
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4> layer 0
  graph.weight @blocks.0.moe_norm : tensor<64xbf16> layer 0
  graph.weight @blocks.0.moe.router.weight : tensor<4x64xbf16> layer 0
  graph.quantized_weight @blocks.0.moe.gate {group = 32} : tensor<4x64x32xi4> layer 0
  graph.quantized_weight @blocks.0.moe.up {group = 32} : tensor<4x64x32xi4> layer 0
  graph.quantized_weight @blocks.0.moe.down {group = 32} : tensor<4x32x64xi4> layer 0
  graph.quantized_weight @blocks.0.moe.s_gate {group = 32} : tensor<1x64x32xi4> layer 0
  graph.quantized_weight @blocks.0.moe.s_up {group = 32} : tensor<1x64x32xi4> layer 0
  graph.quantized_weight @blocks.0.moe.s_down {group = 32} : tensor<1x32x64xi4> layer 0
  graph.state @state.0.S : tensor<2x8x8xf32> layer 0
  graph.state @state.0.cq : tensor<3x16xbf16> layer 0
  graph.state @state.0.ck : tensor<3x16xbf16> layer 0
  graph.state @state.0.cv : tensor<3x16xbf16> layer 0
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %S: tensor<2x8x8xf32> {graph.state = @state.0.S}, %cq: tensor<3x16xbf16> {graph.state = @state.0.cq}, %ck: tensor<3x16xbf16> {graph.state = @state.0.ck}, %cv: tensor<3x16xbf16> {graph.state = @state.0.cv}) -> (tensor<64xbf16>, tensor<2x8x8xf32> {graph.state = @state.0.S}, tensor<3x16xbf16> {graph.state = @state.0.cq}, tensor<3x16xbf16> {graph.state = @state.0.ck}, tensor<3x16xbf16> {graph.state = @state.0.cv}) {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %k = graph.linear_w4a16 %n, @blocks.0.attn.k_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %v = graph.linear_w4a16 %n, @blocks.0.attn.v_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %g = graph.linear_w4a16 %n, @blocks.0.attn.g_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %b = graph.linear_bf16 %n, @blocks.0.attn.beta_proj.weight {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<2xbf16>
    %qc, %cq1 = graph.kda_short_conv %q, %cq, @blocks.0.attn.conv_w[0] : tensor<16xbf16>, tensor<3x16xbf16>
    %kc, %ck1 = graph.kda_short_conv %k, %ck, @blocks.0.attn.conv_w[1] : tensor<16xbf16>, tensor<3x16xbf16>
    %vc, %cv1 = graph.kda_short_conv %v, %cv, @blocks.0.attn.conv_w[2] : tensor<16xbf16>, tensor<3x16xbf16>
    %o, %S1 = graph.kda_gated_delta %qc, %kc, %vc, %g, %b, %S heads(2) head_dim(8) : tensor<16xbf16>, tensor<2xbf16>, tensor<2x8x8xf32>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    %m = graph.rmsnorm %h, @blocks.0.moe_norm eps(1.0e-05) : tensor<64xbf16>
    %w, %idx = graph.moe_router %m, @blocks.0.moe.router.weight top_k(2) scaling(2.5) : tensor<64xbf16> -> tensor<2xf32>, tensor<2xi32>
    %r = graph.moe_experts %m, %w, %idx gate(@blocks.0.moe.gate) up(@blocks.0.moe.up) down(@blocks.0.moe.down) : tensor<64xbf16>, tensor<2xf32>, tensor<2xi32> -> tensor<64xf32>
    %s = graph.shared_experts %m gate(@blocks.0.moe.s_gate) up(@blocks.0.moe.s_up) down(@blocks.0.moe.s_down) : tensor<64xbf16> -> tensor<64xf32>
    %c = graph.moe_combine %r, %s : tensor<64xf32>, tensor<64xf32> -> tensor<64xbf16>
    %h2 = graph.add %h, %c : tensor<64xbf16>
    return %h2, %S1, %cq1, %ck1, %cv1 : tensor<64xbf16>, tensor<2x8x8xf32>, tensor<3x16xbf16>, tensor<3x16xbf16>, tensor<3x16xbf16>
  }
}

// -----

// Two layers of norm + o_proj, no mk.config (no config on the kernel),
// `mk.debug_capture` on the module. The first residual add is folded into
// layer 1's norm (which stores the sum for the final residual); layer 1's
// zeroing has no producer and goes to the first phase; layer 1's norm and
// o_proj share a phase. Every symbol is a parameter, used or not (the
// stack @spare: w_q [2, 8, 8], scales/zeros [2, 2, 8] in groups of 8).
// CHECK-LABEL: schedule.kernel @mk_two attributes {debug_capture, max_shared_bytes = 101376 : i64, num_layers = 2 : i64, threads = 256 : i64} {
// CHECK: schedule.weight @blocks.1.attn.o_proj.zeros {dtype = "bf16", group = 16 : i64, layer = 1 : i64, shape = array<i64: 4, 64>}
// CHECK-NEXT: schedule.weight @spare.w_q {dtype = "u8", group = 8 : i64, shape = array<i64: 2, 8, 8>}
// CHECK-NEXT: schedule.weight @spare.scales {dtype = "bf16", group = 8 : i64, shape = array<i64: 2, 2, 8>}
// CHECK-NEXT: schedule.weight @spare.zeros {dtype = "bf16", group = 8 : i64, shape = array<i64: 2, 2, 8>}
// CHECK-NEXT: schedule.buffer @hidden_in
// CHECK: schedule.phase "blocks.0.attn_norm" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn_norm"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn.o_proj.acc.zero"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.1.attn.o_proj.acc.zero"
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.o_proj" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn.o_proj" {{{.*}}epilogue = "atomic_f32"{{.*}}input = @blocks.0.attn_norm.out{{.*}}outputs = [@blocks.0.attn.o_proj.acc]
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.1.attn_norm" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.1.attn_norm" {{{.*}}acc = @blocks.0.attn.o_proj.acc{{.*}}base = @hidden_in{{.*}}dim = 64 : i64{{.*}}out = @blocks.1.attn_norm.residual{{.*}}partition = #schedule.partition<every_block>
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.1.attn.o_proj" {{{.*}}epilogue = "atomic_f32"{{.*}}input = @blocks.1.attn_norm.out{{.*}}outputs = [@blocks.1.attn.o_proj.acc]
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "final_residual" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "final_residual" {{{.*}}acc = @blocks.1.attn.o_proj.acc{{.*}}base = @blocks.1.attn_norm.residual{{.*}}dim = 64 : i64{{.*}}out = @hidden_out
// OPTS-LABEL: schedule.kernel @mk_two attributes {debug_capture, num_layers = 2 : i64, threads = 1024 : i64} {
module @two attributes {mk.debug_capture} {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16> layer 0
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<64x64xi4> layer 0
  graph.weight @blocks.1.attn_norm : tensor<64xbf16> layer 1
  graph.quantized_weight @blocks.1.attn.o_proj {group = 16} : tensor<64x64xi4> layer 1
  graph.quantized_weight @spare {group = 8} : tensor<2x16x8xi4>
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<64xbf16> {
    %n0 = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %o0 = graph.linear_w4a16 %n0, @blocks.0.attn.o_proj : tensor<64xbf16> -> tensor<64xbf16>
    %h0 = graph.add %x, %o0 : tensor<64xbf16>
    %n1 = graph.rmsnorm %h0, @blocks.1.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %o1 = graph.linear_w4a16 %n1, @blocks.1.attn.o_proj : tensor<64xbf16> -> tensor<64xbf16>
    %h1 = graph.add %h0, %o1 : tensor<64xbf16>
    return %h1 : tensor<64xbf16>
  }
}

// -----

// One MLA layer (absorbed): caches are state with dynamic rows (-1);
// q_proj and kv_a are one task; RoPE and the cache appends are one task
// reading kv_a's output (c at 0, k_rope at kv_lora); the attention scale
// is 1/sqrt(qk_nope + qk_rope) = 1/sqrt(12).
// CHECK-LABEL: schedule.kernel @mk_mla attributes {max_shared_bytes = 101376 : i64, num_layers = 1 : i64, threads = 256 : i64} {
// CHECK: schedule.weight @blocks.0.attn.kv_b.w_q {dtype = "u8", group = 16 : i64, layer = 0 : i64, shape = array<i64: 8, 32>}
// CHECK: schedule.buffer @hidden_in
// CHECK-NEXT: schedule.buffer @state.0.c_kv {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 16>, space = "state"}
// CHECK-NEXT: schedule.buffer @state.0.k_rope {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 4>, space = "state"}
// CHECK: schedule.buffer @blocks.0.attn.q_abs {dtype = "f32", shape = array<i64: 32>}
// CHECK: schedule.buffer @blocks.0.attn.mla_o {dtype = "f32", shape = array<i64: 16>}
// CHECK: schedule.phase "blocks.0.attn_norm" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn_norm"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn.q_proj.group" {{{.*}}n = [24, 20]{{.*}}outputs = [@blocks.0.attn.q_proj.out, @blocks.0.attn.kv_a.out]{{.*}}weights = ["blocks.0.attn.q_proj", "blocks.0.attn.kv_a"]
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn.mla_o.zero"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn.o_proj.acc.zero"
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.rope_append" {
// CHECK-NEXT: schedule.mla_rope_append "blocks.0.attn.rope_append" {c_kv = @state.0.c_kv, heads = 2 : i64, k_rope = @state.0.k_rope, kv = @blocks.0.attn.kv_a.out, lora = 16 : i64, nope = 8 : i64, op = "graph.rope", q = @blocks.0.attn.q_proj.out, q_rope = @blocks.0.attn.q_rope, rope = 4 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: schedule.mla_q_absorb "blocks.0.attn.q_absorb" 
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.attention" {
// CHECK-NEXT: schedule.mla_attention_chunk "blocks.0.attn.attention" {{.*}}scale = 0.28867513459481292 : f64
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.combine_wv" {
// CHECK-NEXT: schedule.mla_combine_wv "blocks.0.attn.combine_wv" {
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.o_proj" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "blocks.0.attn.o_proj" {{.*}}input = @blocks.0.attn.mla_o
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "final_residual" {
module @mla {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16> layer 0
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x24xi4> layer 0
  graph.quantized_weight @blocks.0.attn.kv_a {group = 16} : tensor<64x20xi4> layer 0
  graph.quantized_weight @blocks.0.attn.kv_b {group = 16} : tensor<16x32xi4> layer 0
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4> layer 0
  graph.state @state.0.c_kv : tensor<?x16xbf16> layer 0
  graph.state @state.0.k_rope : tensor<?x4xbf16> layer 0
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %ckv: tensor<?x16xbf16> {graph.state = @state.0.c_kv}, %kr: tensor<?x4xbf16> {graph.state = @state.0.k_rope}) -> tensor<64xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<24xbf16>
    %q2 = graph.reshape %q : tensor<24xbf16> -> tensor<2x12xbf16>
    %qr = graph.rope %q2, %pos theta(10000.0) offset(8) rope_dim(4) : tensor<2x12xbf16>
    %kv = graph.linear_w4a16 %n, @blocks.0.attn.kv_a {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<20xbf16>
    %c = graph.slice %kv[0] : tensor<20xbf16> -> tensor<16xbf16>
    %k = graph.slice %kv[16] : tensor<20xbf16> -> tensor<4xbf16>
    %kr1 = graph.rope %k, %pos theta(10000.0) offset(0) rope_dim(4) : tensor<4xbf16>
    %ckv1 = graph.mla_cache_append %ckv, %c : tensor<?x16xbf16>, tensor<16xbf16>
    %kr2 = graph.mla_cache_append %kr, %kr1 : tensor<?x4xbf16>, tensor<4xbf16>
    %o = graph.mla_attention %qr, %ckv1, %kr2, @blocks.0.attn.kv_b heads(2) qk_nope(8) qk_rope(4) v_head(8) {schedule.absorbed} : tensor<2x12xbf16>, tensor<?x16xbf16>, tensor<?x4xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// One GQA layer: q, k and v one fused projection task; the heads' norms,
// rotate-half RoPE and both cache appends one task (gqa_rope_append) that
// writes the rotated queries (q_rot) and the caches' new rows; the
// attention's partial sums per (chunk, kv head), then one merge per query
// head into o (bf16), o_proj's input.
// CHECK-LABEL: schedule.kernel @mk_gqa attributes {max_shared_bytes = 101376 : i64, num_layers = 1 : i64, threads = 256 : i64} {
// CHECK: schedule.buffer @state.0.k_cache {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 1, 8>, space = "state"}
// CHECK-NEXT: schedule.buffer @state.0.v_cache {dtype = "bf16", layer = 0 : i64, shape = array<i64: -1, 1, 8>, space = "state"}
// CHECK: schedule.buffer @blocks.0.attn.q_rot {dtype = "bf16", shape = array<i64: 16>}
// CHECK: schedule.buffer @blocks.0.attn.gqa_o {dtype = "bf16", shape = array<i64: 16>}
// CHECK: schedule.phase "blocks.0.attn_norm" {
// CHECK-NEXT: schedule.residual_rmsnorm "blocks.0.attn_norm"
// CHECK-NEXT: schedule.w4a16_gemv "blocks.0.attn.q_proj.group" {{{.*}}n = [16, 8, 8]{{.*}}outputs = [@blocks.0.attn.q_proj.out, @blocks.0.attn.k_proj.out, @blocks.0.attn.v_proj.out]
// CHECK: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.rope_append" {
// CHECK-NEXT: schedule.gqa_rope_append "blocks.0.attn.rope_append" {eps = 9.9999999999999995E-7 : f64, head_dim = 8 : i64, heads = 2 : i64, k = @blocks.0.attn.k_proj.out, k_cache = @state.0.k_cache, k_norm = "blocks.0.attn.k_norm", kv_heads = 1 : i64, op = "graph.rope", q = @blocks.0.attn.q_proj.out, q_norm = "blocks.0.attn.q_norm", q_out = @blocks.0.attn.q_rot, theta = 1.000000e+06 : f64, v = @blocks.0.attn.v_proj.out, v_cache = @state.0.v_cache}
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.attention" {
// CHECK-NEXT: schedule.gqa_attention_chunk "blocks.0.attn.attention" {head_dim = 8 : i64, heads = 2 : i64, k_cache = @state.0.k_cache, kv_heads = 1 : i64, op = "graph.gqa_attention", part_acc = @blocks.0.attn.part_acc, part_l = @blocks.0.attn.part_l, part_m = @blocks.0.attn.part_m, q = @blocks.0.attn.q_rot, v_cache = @state.0.v_cache}
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.combine" {
// CHECK-NEXT: schedule.gqa_combine "blocks.0.attn.combine" {head_dim = 8 : i64, heads = 2 : i64, o = @blocks.0.attn.gqa_o, op = "graph.gqa_attention", part_acc = @blocks.0.attn.part_acc, part_l = @blocks.0.attn.part_l, part_m = @blocks.0.attn.part_m}
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "blocks.0.attn.o_proj" {
// CHECK-NEXT: schedule.w4a16_gemv "blocks.0.attn.o_proj" {{.*}}input = @blocks.0.attn.gqa_o
module @gqa {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16> layer 0
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4> layer 0
  graph.quantized_weight @blocks.0.attn.k_proj {group = 16} : tensor<64x8xi4> layer 0
  graph.quantized_weight @blocks.0.attn.v_proj {group = 16} : tensor<64x8xi4> layer 0
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4> layer 0
  graph.weight @blocks.0.attn.q_norm : tensor<8xbf16> layer 0
  graph.weight @blocks.0.attn.k_norm : tensor<8xbf16> layer 0
  graph.state @state.0.k_cache : tensor<?x1x8xbf16> layer 0
  graph.state @state.0.v_cache : tensor<?x1x8xbf16> layer 0
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %kc: tensor<?x1x8xbf16> {graph.state = @state.0.k_cache}, %vc: tensor<?x1x8xbf16> {graph.state = @state.0.v_cache}) -> tensor<64xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %k = graph.linear_w4a16 %n, @blocks.0.attn.k_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<8xbf16>
    %v = graph.linear_w4a16 %n, @blocks.0.attn.v_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<8xbf16>
    %q2 = graph.reshape %q : tensor<16xbf16> -> tensor<2x8xbf16>
    %qn = graph.head_rmsnorm %q2, @blocks.0.attn.q_norm eps(1.0e-06) : tensor<2x8xbf16>
    %qr = graph.rope %qn, %pos theta(1000000.0) offset(0) rope_dim(8) rotate_half : tensor<2x8xbf16>
    %k2 = graph.reshape %k : tensor<8xbf16> -> tensor<1x8xbf16>
    %kn = graph.head_rmsnorm %k2, @blocks.0.attn.k_norm eps(1.0e-06) : tensor<1x8xbf16>
    %kr = graph.rope %kn, %pos theta(1000000.0) offset(0) rope_dim(8) rotate_half : tensor<1x8xbf16>
    %v2 = graph.reshape %v : tensor<8xbf16> -> tensor<1x8xbf16>
    %kc1 = graph.kv_cache_append %kc, %kr : tensor<?x1x8xbf16>, tensor<1x8xbf16>
    %vc1 = graph.kv_cache_append %vc, %v2 : tensor<?x1x8xbf16>, tensor<1x8xbf16>
    %o = graph.gqa_attention %qr, %kc1, %vc1 : tensor<2x8xbf16>, tensor<?x1x8xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// No @decode_step (already lowered): left as it is, not even given the
// max_shared_bytes the lowering sets.
// CHECK-LABEL: module @lowered {
// CHECK-NEXT: schedule.kernel @mk_lowered attributes {threads = 64 : i64} {
// CHECK-NEXT: schedule.phase "p" {
module @lowered {
  schedule.kernel @mk_lowered attributes {threads = 64 : i64} {
    schedule.phase "p" {
      schedule.opaque "t" {count = 1 : i64}
    }
  }
}

// -----

// The state buffers (the step's arguments, in order) must be the
// graph.state symbols in their order: here they are declared the other way.
module @state_order {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<64x64xi4>
  graph.state @state.0.b : tensor<4xf32>
  graph.state @state.0.a : tensor<?x8xbf16>
  // expected-error @+1 {{'func.func' op lowered decode state does not match the module's graph.state symbols}}
  func.func @decode_step(%x: tensor<64xbf16>, %a: tensor<?x8xbf16> {graph.state = @state.0.a}, %b: tensor<4xf32> {graph.state = @state.0.b}) -> tensor<64xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %o = graph.linear_w4a16 %n, @blocks.0.attn.o_proj : tensor<64xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %o : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// Past the hidden input, a tensor argument must be decode state (an i32,
// the position, is a scalar).
module @untied {
  // expected-error @+1 {{'func.func' op argument 2 is not tied to a state}}
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %y: tensor<64xbf16>) -> tensor<64xbf16> {
    %h = graph.add %x, %y : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// An op that is not a graph op has no tasks.
module @call {
  func.func private @helper(tensor<64xbf16>) -> tensor<64xbf16>
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<64xbf16> {
    // expected-error @+1 {{'func.call' op has no schedule lowering}}
    %y = func.call @helper(%x) : (tensor<64xbf16>) -> tensor<64xbf16>
    return %y : tensor<64xbf16>
  }
}

// -----

// MLA attention without graph-absorb-mla's mark.
module @materialized {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x24xi4>
  graph.quantized_weight @blocks.0.attn.kv_b {group = 16} : tensor<16x32xi4>
  graph.state @state.0.c_kv : tensor<?x16xbf16>
  graph.state @state.0.k_rope : tensor<?x4xbf16>
  func.func @decode_step(%x: tensor<64xbf16>, %ckv: tensor<?x16xbf16> {graph.state = @state.0.c_kv}, %kr: tensor<?x4xbf16> {graph.state = @state.0.k_rope}) -> tensor<16xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj : tensor<64xbf16> -> tensor<24xbf16>
    %q2 = graph.reshape %q : tensor<24xbf16> -> tensor<2x12xbf16>
    // expected-error @+1 {{'graph.mla_attention' op materialized MLA attention has no lowering; run graph-absorb-mla first}}
    %o = graph.mla_attention %q2, %ckv, %kr, @blocks.0.attn.kv_b heads(2) qk_nope(8) qk_rope(4) v_head(8) : tensor<2x12xbf16>, tensor<?x16xbf16>, tensor<?x4xbf16> -> tensor<16xbf16>
    return %o : tensor<16xbf16>
  }
}

// -----

// The step's output is the last residual add (of an fp32 sum to a stored
// value), lowered to the final_residual task.
module @no_residual {
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<64xbf16> {
    // expected-error @+1 {{'func.return' op hidden output must be a residual add}}
    return %x : tensor<64xbf16>
  }
}

// -----

// A residual add whose operands are the other way round (the fp32 sum
// first): the norm after it refuses it.
module @swapped {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<64x64xi4>
  graph.weight @blocks.0.moe_norm : tensor<64xbf16>
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<64xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %o = graph.linear_w4a16 %n, @blocks.0.attn.o_proj : tensor<64xbf16> -> tensor<64xbf16>
    %h = graph.add %o, %x : tensor<64xbf16>
    // expected-error @+1 {{'graph.rmsnorm' op residual must add an fp32-accumulated value to a stored one}}
    %m = graph.rmsnorm %h, @blocks.0.moe_norm eps(1.0e-06) : tensor<64xbf16>
    return %m : tensor<64xbf16>
  }
}

// -----

// A bf16 linear reads the normalized input in shared memory only.
module @bf16_stored {
  graph.weight @blocks.0.beta : tensor<2x64xbf16>
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<2xbf16> {
    // expected-error @+1 {{'graph.linear_bf16' op bf16 linears read the normalized input}}
    %b = graph.linear_bf16 %x, @blocks.0.beta : tensor<64xbf16> -> tensor<2xbf16>
    return %b : tensor<2xbf16>
  }
}

// -----

// A projection feeding a residual accumulates on its own: marked into a
// fusion group by hand, it is refused.
module @fused_residual {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<64x64xi4>
  func.func @decode_step(%x: tensor<64xbf16>) -> (tensor<64xbf16>, tensor<16xbf16>) {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "g"} : tensor<64xbf16> -> tensor<16xbf16>
    // expected-error @+1 {{'graph.linear_w4a16' op a fused projection cannot feed a residual}}
    %o = graph.linear_w4a16 %n, @blocks.0.attn.o_proj {schedule.fusion_group = "g"} : tensor<64xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %o : tensor<64xbf16>
    return %h, %q : tensor<64xbf16>, tensor<16xbf16>
  }
}

// -----

// One grouped GEMV task has one quantization group: members marked into
// one group by hand with groups of 16 and 32 are refused (on the first).
module @fused_groups {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.k_proj {group = 32} : tensor<64x16xi4>
  func.func @decode_step(%x: tensor<64xbf16>) -> (tensor<16xbf16>, tensor<16xbf16>) {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    // expected-error @+1 {{'graph.linear_w4a16' op fused projections quantized in different groups (16 and 32)}}
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "g"} : tensor<64xbf16> -> tensor<16xbf16>
    %k = graph.linear_w4a16 %n, @blocks.0.attn.k_proj {schedule.fusion_group = "g"} : tensor<64xbf16> -> tensor<16xbf16>
    return %q, %k : tensor<16xbf16>, tensor<16xbf16>
  }
}

// -----

// The router reads the normalized input in shared memory, not a stored one.
module @router_stored {
  graph.weight @blocks.0.moe.router.weight : tensor<4x64xbf16>
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<64xbf16> {
    // expected-error @+1 {{'graph.moe_router' op expects the normalized input in shared memory}}
    %w, %idx = graph.moe_router %x, @blocks.0.moe.router.weight top_k(2) scaling(1.0) : tensor<64xbf16> -> tensor<2xf32>, tensor<2xi32>
    return %x : tensor<64xbf16>
  }
}

// -----

// Slices are offsets into stored rank-1 buffers; the normalized input
// lives in shared memory.
module @slice_shared {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  func.func @decode_step(%x: tensor<64xbf16>) -> tensor<32xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    // expected-error @+1 {{'graph.slice' op slices of buffers of rank 1 only}}
    %s = graph.slice %n[0] : tensor<64xbf16> -> tensor<32xbf16>
    return %s : tensor<32xbf16>
  }
}
