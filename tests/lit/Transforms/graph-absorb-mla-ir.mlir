// RUN: mk-opt %s -split-input-file --graph-absorb-mla | FileCheck %s

// Every graph.mla_attention is marked schedule.absorbed: phase formation
// lowers it with W_kv_b folded into the query and output rather than
// materializing c_kv @ W_kv_b. Nothing else changes. The cases: one MLA layer
// (its q/kv projections and cache appends stay unmarked), two layers with
// their own kv_b (both marked), and a step without MLA (left alone).
// The pass also rejects a kv_b that is not a graph.quantized_weight or lacks
// heads*(qk_nope+v_head) columns, but the mla_attention verifier already
// refuses such IR when it is parsed (tests/lit/Graph/invalid.mlir), so mk-opt
// cannot reach those errors.

// Hm = 2 heads, qk_nope = qk_rope = v_head = 4, kv_lora = 8: kv_b is
// [8, 2 * (4 + 4)].
// CHECK-LABEL: module @mla
// CHECK: graph.linear_w4a16 %{{.*}}, @q_proj : tensor<16xbf16> -> tensor<16xbf16>
// CHECK: %[[Q2:.*]] = graph.reshape
// CHECK: graph.linear_w4a16 %{{.*}}, @kv_a : tensor<16xbf16> -> tensor<12xbf16>
// CHECK: %[[CKV:.*]] = graph.mla_cache_append %{{.*}}, %{{.*}} : tensor<?x8xbf16>, tensor<8xbf16>
// CHECK: %[[KR:.*]] = graph.mla_cache_append %{{.*}}, %{{.*}} : tensor<?x4xbf16>, tensor<4xbf16>
// CHECK: graph.mla_attention %[[Q2]], %[[CKV]], %[[KR]], @kv_b heads(2) qk_nope(4) qk_rope(4) v_head(4) {schedule.absorbed} : tensor<2x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
module @mla {
  graph.quantized_weight @q_proj {group = 8} : tensor<16x16xi4>
  graph.quantized_weight @kv_a {group = 8} : tensor<16x12xi4>
  graph.quantized_weight @kv_b {group = 8} : tensor<8x16xi4>
  graph.state @c_kv : tensor<?x8xbf16>
  graph.state @k_rope : tensor<?x4xbf16>
  func.func @decode_step(%n: tensor<16xbf16>,
                         %ckv: tensor<?x8xbf16> {graph.state = @c_kv},
                         %kr: tensor<?x4xbf16> {graph.state = @k_rope})
      -> (tensor<8xbf16>, tensor<?x8xbf16> {graph.state = @c_kv},
          tensor<?x4xbf16> {graph.state = @k_rope}) {
    %q = graph.linear_w4a16 %n, @q_proj : tensor<16xbf16> -> tensor<16xbf16>
    %q2 = graph.reshape %q : tensor<16xbf16> -> tensor<2x8xbf16>
    %kv = graph.linear_w4a16 %n, @kv_a : tensor<16xbf16> -> tensor<12xbf16>
    %c = graph.slice %kv[0] : tensor<12xbf16> -> tensor<8xbf16>
    %k = graph.slice %kv[8] : tensor<12xbf16> -> tensor<4xbf16>
    %ckv1 = graph.mla_cache_append %ckv, %c : tensor<?x8xbf16>, tensor<8xbf16>
    %kr1 = graph.mla_cache_append %kr, %k : tensor<?x4xbf16>, tensor<4xbf16>
    %o = graph.mla_attention %q2, %ckv1, %kr1, @kv_b heads(2) qk_nope(4) qk_rope(4) v_head(4) : tensor<2x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
    return %o, %ckv1, %kr1 : tensor<8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16>
  }
}

// -----

// Two MLA layers, each with its kv_b (the second 1 head, v_head = 8).
// CHECK-LABEL: module @two_layers
// CHECK: graph.mla_attention {{.*}}, @kv_b0 heads(2) qk_nope(4) qk_rope(4) v_head(4) {schedule.absorbed} :
// CHECK: graph.mla_attention {{.*}}, @kv_b1 heads(1) qk_nope(4) qk_rope(4) v_head(8) {schedule.absorbed} :
module @two_layers {
  graph.quantized_weight @kv_b0 {group = 8} : tensor<8x16xi4>
  graph.quantized_weight @kv_b1 {group = 8} : tensor<8x12xi4>
  func.func @decode_step(%q0: tensor<2x8xbf16>, %q1: tensor<1x8xbf16>,
                         %ckv: tensor<?x8xbf16>, %kr: tensor<?x4xbf16>) {
    %o0 = graph.mla_attention %q0, %ckv, %kr, @kv_b0 heads(2) qk_nope(4) qk_rope(4) v_head(4) : tensor<2x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
    %o1 = graph.mla_attention %q1, %ckv, %kr, @kv_b1 heads(1) qk_nope(4) qk_rope(4) v_head(8) : tensor<1x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
    return
  }
}

// -----

// No MLA attention: nothing is marked, not even a linear reading a
// kv_b-shaped weight.
// CHECK-LABEL: module @no_mla
// CHECK-NOT: schedule.absorbed
// CHECK: graph.linear_w4a16 %{{.*}}, @kv_b : tensor<8xbf16> -> tensor<16xbf16>
module @no_mla {
  graph.quantized_weight @kv_b {group = 8} : tensor<8x16xi4>
  func.func @decode_step(%x: tensor<8xbf16>) -> tensor<16xbf16> {
    %y = graph.linear_w4a16 %x, @kv_b : tensor<8xbf16> -> tensor<16xbf16>
    return %y : tensor<16xbf16>
  }
}
