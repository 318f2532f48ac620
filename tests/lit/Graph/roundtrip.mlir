// RUN: mk-opt %s | mk-opt | FileCheck %s
// RUN: mk-opt %s --mlir-print-op-generic | mk-opt | FileCheck %s

// Every graph op, in a miniature of the Kimi-Linear unit: d = 16, one KDA
// layer (2 heads of 4, C = 8), one MLA layer (2 heads, qk_nope = qk_rope =
// v_head = 4, kv_lora = 8), 4 routed experts (top 2) and one shared, m = 8.

// CHECK-LABEL: module @roundtrip
module @roundtrip {
  // CHECK: graph.weight @norm : tensor<16xbf16>
  graph.weight @"norm" : tensor<16xbf16>
  // CHECK: graph.quantized_weight @blocks.0.attn.q_proj {group = 8} : tensor<16x8xi4> layer 0
  graph.quantized_weight @"blocks.0.attn.q_proj" {group = 8} : tensor<16x8xi4> layer 0
  graph.quantized_weight @o_proj {group = 8} : tensor<8x16xi4>
  // CHECK: graph.weight @beta : tensor<2x16xbf16> layer 1
  graph.weight @beta : tensor<2x16xbf16> layer 1
  graph.weight @conv_w : tensor<3x8x4xbf16>
  // CHECK: graph.weight @a_log : tensor<2xf32>
  graph.weight @a_log : tensor<2xf32>
  graph.weight @dt_bias : tensor<8xf32>
  graph.weight @o_norm : tensor<4xbf16>
  graph.weight @embed : tensor<32x16xbf16>
  graph.quantized_weight @mla_q {group = 8} : tensor<16x16xi4>
  graph.quantized_weight @kv_a {group = 8} : tensor<16x12xi4>
  graph.quantized_weight @kv_b {group = 8} : tensor<8x16xi4>
  graph.weight @router : tensor<4x16xbf16>
  graph.weight @router_bias : tensor<4xbf16>
  // CHECK: graph.quantized_weight @gate {group = 8} : tensor<4x16x8xi4>
  graph.quantized_weight @gate {group = 8} : tensor<4x16x8xi4>
  graph.quantized_weight @up {group = 8} : tensor<4x16x8xi4>
  graph.quantized_weight @down {group = 8} : tensor<4x8x16xi4>
  graph.quantized_weight @s_gate {group = 8} : tensor<1x16x8xi4>
  graph.quantized_weight @s_up {group = 8} : tensor<1x16x8xi4>
  graph.quantized_weight @s_down {group = 8} : tensor<1x8x16xi4>
  // CHECK: graph.state @state.0.S : tensor<2x4x4xf32> layer 0
  graph.state @"state.0.S" : tensor<2x4x4xf32> layer 0
  graph.state @"state.0.cq" : tensor<3x8xbf16>
  // CHECK: graph.state @state.1.c_kv : tensor<?x8xbf16>
  graph.state @"state.1.c_kv" : tensor<?x8xbf16>
  graph.state @"state.1.k_rope" : tensor<?x4xbf16>

  // CHECK-LABEL: func.func @step
  // CHECK-SAME: %[[X:.*]]: tensor<16xbf16>, %[[POS:.*]]: i32,
  // CHECK-SAME: %[[S:.*]]: tensor<2x4x4xf32> {graph.state = @state.0.S}
  // CHECK-SAME: -> (tensor<16xbf16>, tensor<2x4x4xf32> {graph.state = @state.0.S}
  func.func @step(%x: tensor<16xbf16>, %pos: i32,
                  %S: tensor<2x4x4xf32> {graph.state = @"state.0.S"},
                  %cq: tensor<3x8xbf16> {graph.state = @"state.0.cq"},
                  %ckv: tensor<?x8xbf16> {graph.state = @"state.1.c_kv"},
                  %kr: tensor<?x4xbf16> {graph.state = @"state.1.k_rope"})
      -> (tensor<16xbf16>,
          tensor<2x4x4xf32> {graph.state = @"state.0.S"},
          tensor<3x8xbf16> {graph.state = @"state.0.cq"},
          tensor<?x8xbf16> {graph.state = @"state.1.c_kv"},
          tensor<?x4xbf16> {graph.state = @"state.1.k_rope"}) {
    // CHECK: %[[N:.*]] = graph.rmsnorm %[[X]], @norm eps(1.0e-06) : tensor<16xbf16>
    %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<16xbf16>
    // CHECK: %[[Q:.*]] = graph.linear_w4a16 %[[N]], @blocks.0.attn.q_proj : tensor<16xbf16> -> tensor<8xbf16>
    %q = graph.linear_w4a16 %n, @"blocks.0.attn.q_proj" : tensor<16xbf16> -> tensor<8xbf16>
    // CHECK: %[[B:.*]] = graph.linear_bf16 %[[N]], @beta : tensor<16xbf16> -> tensor<2xbf16>
    %b = graph.linear_bf16 %n, @beta : tensor<16xbf16> -> tensor<2xbf16>
    // CHECK: %[[QC:.*]], %{{.*}} = graph.kda_short_conv %[[Q]], %{{.*}}, @conv_w[0] : tensor<8xbf16>, tensor<3x8xbf16>
    %qc, %cq1 = graph.kda_short_conv %q, %cq, @conv_w[0] : tensor<8xbf16>, tensor<3x8xbf16>
    // CHECK: %[[O:.*]], %[[S1:.*]] = graph.kda_gated_delta %[[QC]], %[[QC]], %[[QC]], %[[Q]], %[[B]], %[[S]] heads(2) head_dim(4) : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
    %o, %S1 = graph.kda_gated_delta %qc, %qc, %qc, %q, %b, %S heads(2) head_dim(4) : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
    // The released form: L2 norms, the low-rank decay, the gated output norm.
    // CHECK: %[[O2:.*]], %{{.*}} = graph.kda_gated_delta %[[QC]], %[[QC]], %[[QC]], %[[Q]], %[[B]], %[[S1]] heads(2) head_dim(4) {a_log = @a_log, dt_bias = @dt_bias, qk_l2_eps = 9.9999999999999995E-7 : f64} : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
    %o2, %S2 = graph.kda_gated_delta %qc, %qc, %qc, %q, %b, %S1 heads(2) head_dim(4) {a_log = @a_log, dt_bias = @dt_bias, qk_l2_eps = 1.0e-06 : f64} : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
    // CHECK: %{{.*}} = graph.kda_gated_norm %[[O2]], %[[Q]], @o_norm heads(2) head_dim(4) eps(1.0e-05) : tensor<8xbf16>
    %z = graph.kda_gated_norm %o2, %q, @o_norm heads(2) head_dim(4) eps(1.0e-05) : tensor<8xbf16>
    // The whole model's embedding lookup and argmax.
    // CHECK: %[[E:.*]] = graph.embedding %[[POS]], @embed : tensor<16xbf16>
    %e = graph.embedding %pos, @embed : tensor<16xbf16>
    // CHECK: %{{.*}} = graph.argmax %[[E]] : tensor<16xbf16>
    %am = graph.argmax %e : tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @o_proj : tensor<8xbf16> -> tensor<16xbf16>
    // CHECK: %[[H:.*]] = graph.add %[[X]], %{{.*}} : tensor<16xbf16>
    %h = graph.add %x, %a : tensor<16xbf16>

    %mq = graph.linear_w4a16 %h, @mla_q : tensor<16xbf16> -> tensor<16xbf16>
    // CHECK: %[[MQ2:.*]] = graph.reshape %{{.*}} : tensor<16xbf16> -> tensor<2x8xbf16>
    %mq2 = graph.reshape %mq : tensor<16xbf16> -> tensor<2x8xbf16>
    // CHECK: %[[QR:.*]] = graph.rope %[[MQ2]], %[[POS]] theta(10000.0) offset(4) rope_dim(4) : tensor<2x8xbf16>
    %qr = graph.rope %mq2, %pos theta(10000.0) offset(4) rope_dim(4) : tensor<2x8xbf16>
    %kv = graph.linear_w4a16 %h, @kv_a : tensor<16xbf16> -> tensor<12xbf16>
    // CHECK: %[[C:.*]] = graph.slice %[[KV:.*]][0] : tensor<12xbf16> -> tensor<8xbf16>
    %c = graph.slice %kv[0] : tensor<12xbf16> -> tensor<8xbf16>
    // CHECK: graph.slice %[[KV]][8] : tensor<12xbf16> -> tensor<4xbf16>
    %k = graph.slice %kv[8] : tensor<12xbf16> -> tensor<4xbf16>
    %kr0 = graph.rope %k, %pos theta(5.0e+05) offset(0) rope_dim(4) : tensor<4xbf16>
    // CHECK: %[[CKV1:.*]] = graph.mla_cache_append %{{.*}}, %[[C]] : tensor<?x8xbf16>, tensor<8xbf16>
    %ckv1 = graph.mla_cache_append %ckv, %c : tensor<?x8xbf16>, tensor<8xbf16>
    %kr1 = graph.mla_cache_append %kr, %kr0 : tensor<?x4xbf16>, tensor<4xbf16>
    // CHECK: graph.mla_attention %[[QR]], %[[CKV1]], %{{.*}}, @kv_b heads(2) qk_nope(4) qk_rope(4) v_head(4) : tensor<2x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
    %mo = graph.mla_attention %qr, %ckv1, %kr1, @kv_b heads(2) qk_nope(4) qk_rope(4) v_head(4) : tensor<2x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
    %a2 = graph.linear_w4a16 %mo, @o_proj : tensor<8xbf16> -> tensor<16xbf16>
    %h2 = graph.add %h, %a2 : tensor<16xbf16>

    // CHECK: %[[W:.*]], %[[IDX:.*]] = graph.moe_router %{{.*}}, @router top_k(2) scaling(2.446) : tensor<16xbf16> -> tensor<2xf32>, tensor<2xi32>
    %w, %idx = graph.moe_router %h2, @router top_k(2) scaling(2.446) : tensor<16xbf16> -> tensor<2xf32>, tensor<2xi32>
    // The released model's sigmoid router: its correction bias.
    // CHECK: graph.moe_router %{{.*}}, @router bias(@router_bias) top_k(2) scaling(2.446) : tensor<16xbf16> -> tensor<2xf32>, tensor<2xi32>
    %ws, %idxs = graph.moe_router %h2, @router bias(@router_bias) top_k(2) scaling(2.446) : tensor<16xbf16> -> tensor<2xf32>, tensor<2xi32>
    // CHECK: %[[R:.*]] = graph.moe_experts %{{.*}}, %[[W]], %[[IDX]] gate(@gate) up(@up) down(@down) : tensor<16xbf16>, tensor<2xf32>, tensor<2xi32> -> tensor<16xf32>
    %r = graph.moe_experts %h2, %w, %idx gate(@gate) up(@up) down(@down) : tensor<16xbf16>, tensor<2xf32>, tensor<2xi32> -> tensor<16xf32>
    // CHECK: %[[SH:.*]] = graph.shared_experts %{{.*}} gate(@s_gate) up(@s_up) down(@s_down) : tensor<16xbf16> -> tensor<16xf32>
    %s = graph.shared_experts %h2 gate(@s_gate) up(@s_up) down(@s_down) : tensor<16xbf16> -> tensor<16xf32>
    // CHECK: graph.moe_combine %[[R]], %[[SH]] : tensor<16xf32>, tensor<16xf32> -> tensor<16xbf16>
    %m = graph.moe_combine %r, %s : tensor<16xf32>, tensor<16xf32> -> tensor<16xbf16>
    // CHECK: graph.moe_combine %[[R]] : tensor<16xf32> -> tensor<16xbf16>
    %m2 = graph.moe_combine %r : tensor<16xf32> -> tensor<16xbf16>
    // The released model's FFN rounding: bf16 steps, parts rounded apart.
    // CHECK: %[[R2:.*]] = graph.moe_experts %{{.*}}, %[[W]], %[[IDX]] gate(@gate) up(@up) down(@down) bf16_steps : tensor<16xbf16>, tensor<2xf32>, tensor<2xi32> -> tensor<16xf32>
    %r2 = graph.moe_experts %h2, %w, %idx gate(@gate) up(@up) down(@down) bf16_steps : tensor<16xbf16>, tensor<2xf32>, tensor<2xi32> -> tensor<16xf32>
    // CHECK: %[[SH2:.*]] = graph.shared_experts %{{.*}} gate(@s_gate) up(@s_up) down(@s_down) bf16_steps : tensor<16xbf16> -> tensor<16xf32>
    %s2 = graph.shared_experts %h2 gate(@s_gate) up(@s_up) down(@s_down) bf16_steps : tensor<16xbf16> -> tensor<16xf32>
    // CHECK: graph.moe_combine %[[R2]], %[[SH2]] round_parts : tensor<16xf32>, tensor<16xf32> -> tensor<16xbf16>
    %m3 = graph.moe_combine %r2, %s2 round_parts : tensor<16xf32>, tensor<16xf32> -> tensor<16xbf16>
    %y = graph.add %m, %m2 : tensor<16xbf16>
    return %y, %S1, %cq1, %ckv1, %kr1 : tensor<16xbf16>, tensor<2x4x4xf32>, tensor<3x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16>
  }
}
