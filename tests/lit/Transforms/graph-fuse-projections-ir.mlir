// RUN: mk-opt %s -split-input-file --graph-fuse-projections | FileCheck %s

// Linears (linear_w4a16, linear_bf16) that read one value get one
// schedule.fusion_group, named after the first W4A16 member's weight; a
// group needs two members, one of them W4A16. The cases: KDA's q/k + beta
// on the normed input (o_proj reads another value and stays alone), group
// names taken from the first W4A16 member even after a bf16 one, one group
// per input, and inputs whose linears must not fuse. The pass emits no
// errors of its own.

// CHECK-LABEL: func.func @decode_step
// CHECK: %[[N:.*]] = graph.rmsnorm
// CHECK: %[[Q:.*]] = graph.linear_w4a16 %[[N]], @q_proj {schedule.fusion_group = "q_proj.group"} : tensor<16xbf16> -> tensor<8xbf16>
// CHECK: graph.linear_w4a16 %[[N]], @k_proj {schedule.fusion_group = "q_proj.group"} : tensor<16xbf16> -> tensor<8xbf16>
// CHECK: graph.linear_bf16 %[[N]], @beta {schedule.fusion_group = "q_proj.group"} : tensor<16xbf16> -> tensor<2xbf16>
// CHECK: graph.linear_w4a16 %[[Q]], @o_proj : tensor<8xbf16> -> tensor<16xbf16>
graph.weight @norm : tensor<16xbf16>
graph.quantized_weight @q_proj {group = 8} : tensor<16x8xi4>
graph.quantized_weight @k_proj {group = 8} : tensor<16x8xi4>
graph.weight @beta : tensor<2x16xbf16>
graph.quantized_weight @o_proj {group = 8} : tensor<8x16xi4>
func.func @decode_step(%x: tensor<16xbf16>) -> (tensor<16xbf16>, tensor<8xbf16>) {
  %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<16xbf16>
  %q = graph.linear_w4a16 %n, @q_proj : tensor<16xbf16> -> tensor<8xbf16>
  %k = graph.linear_w4a16 %n, @k_proj : tensor<16xbf16> -> tensor<8xbf16>
  %b = graph.linear_bf16 %n, @beta : tensor<16xbf16> -> tensor<2xbf16>
  %o = graph.linear_w4a16 %q, @o_proj : tensor<8xbf16> -> tensor<16xbf16>
  %h = graph.add %x, %o : tensor<16xbf16>
  // q is returned too: read by more than projections, it is no bottleneck.
  return %h, %q : tensor<16xbf16>, tensor<8xbf16>
}

// -----

// Bottlenecks (projections read only by other projections: the released
// KDA's f_a and g_a) group among themselves, apart from their siblings
// whose tiles are ordered by head; what reads them stays alone.
// CHECK-LABEL: func.func @decode_step
// CHECK: %[[N:.*]] = graph.rmsnorm
// CHECK: graph.linear_w4a16 %[[N]], @q_proj {schedule.fusion_group = "q_proj.group"}
// CHECK: %[[FA:.*]] = graph.linear_w4a16 %[[N]], @f_a {schedule.fusion_group = "f_a.group"}
// CHECK: %[[GA:.*]] = graph.linear_w4a16 %[[N]], @g_a {schedule.fusion_group = "f_a.group"}
// CHECK: graph.linear_bf16 %[[N]], @beta {schedule.fusion_group = "q_proj.group"}
// CHECK: graph.linear_w4a16 %[[FA]], @f_b : tensor<4xbf16> -> tensor<8xbf16>
// CHECK: graph.linear_w4a16 %[[GA]], @g_b : tensor<4xbf16> -> tensor<8xbf16>
graph.weight @norm : tensor<16xbf16>
graph.quantized_weight @q_proj {group = 4} : tensor<16x8xi4>
graph.quantized_weight @f_a {group = 4} : tensor<16x4xi4>
graph.quantized_weight @g_a {group = 4} : tensor<16x4xi4>
graph.quantized_weight @f_b {group = 4} : tensor<4x8xi4>
graph.quantized_weight @g_b {group = 4} : tensor<4x8xi4>
graph.weight @beta : tensor<2x16xbf16>
func.func @decode_step(%x: tensor<16xbf16>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<2xbf16>) {
  %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<16xbf16>
  %q = graph.linear_w4a16 %n, @q_proj : tensor<16xbf16> -> tensor<8xbf16>
  %fa = graph.linear_w4a16 %n, @f_a : tensor<16xbf16> -> tensor<4xbf16>
  %ga = graph.linear_w4a16 %n, @g_a : tensor<16xbf16> -> tensor<4xbf16>
  %b = graph.linear_bf16 %n, @beta : tensor<16xbf16> -> tensor<2xbf16>
  %f = graph.linear_w4a16 %fa, @f_b : tensor<4xbf16> -> tensor<8xbf16>
  %g = graph.linear_w4a16 %ga, @g_b : tensor<4xbf16> -> tensor<8xbf16>
  return %q, %f, %g, %b : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<2xbf16>
}

// -----

// Two inputs, two groups. On %x a bf16 linear comes first: the group is
// still named after the first W4A16 member (kv_a, not q_proj after it).
// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: (%[[X:.*]]: tensor<16xbf16>, %[[Y:.*]]: tensor<16xbf16>)
// CHECK: graph.linear_bf16 %[[X]], @beta {schedule.fusion_group = "kv_a.group"}
// CHECK: graph.linear_w4a16 %[[X]], @kv_a {schedule.fusion_group = "kv_a.group"}
// CHECK: graph.linear_w4a16 %[[X]], @q_proj {schedule.fusion_group = "kv_a.group"}
// CHECK: graph.linear_w4a16 %[[Y]], @g_proj {schedule.fusion_group = "g_proj.group"}
// CHECK: graph.linear_w4a16 %[[Y]], @v_proj {schedule.fusion_group = "g_proj.group"}
graph.weight @beta : tensor<2x16xbf16>
graph.quantized_weight @kv_a {group = 8} : tensor<16x12xi4>
graph.quantized_weight @q_proj {group = 8} : tensor<16x16xi4>
graph.quantized_weight @g_proj {group = 8} : tensor<16x8xi4>
graph.quantized_weight @v_proj {group = 8} : tensor<16x8xi4>
func.func @decode_step(%x: tensor<16xbf16>, %y: tensor<16xbf16>) {
  %b = graph.linear_bf16 %x, @beta : tensor<16xbf16> -> tensor<2xbf16>
  %kv = graph.linear_w4a16 %x, @kv_a : tensor<16xbf16> -> tensor<12xbf16>
  %q = graph.linear_w4a16 %x, @q_proj : tensor<16xbf16> -> tensor<16xbf16>
  %g = graph.linear_w4a16 %y, @g_proj : tensor<16xbf16> -> tensor<8xbf16>
  %v = graph.linear_w4a16 %y, @v_proj : tensor<16xbf16> -> tensor<8xbf16>
  return
}

// -----

// Nothing to fuse: %x has one linear (the rmsnorm reading it is no
// projection), %n has two bf16 linears and no W4A16 one.
// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: (%[[X:.*]]: tensor<16xbf16>)
// CHECK: %[[N:.*]] = graph.rmsnorm %[[X]], @norm
// CHECK: graph.linear_w4a16 %[[X]], @q_proj : tensor<16xbf16> -> tensor<8xbf16>
// CHECK: graph.linear_bf16 %[[N]], @beta : tensor<16xbf16> -> tensor<2xbf16>
// CHECK: graph.linear_bf16 %[[N]], @gamma : tensor<16xbf16> -> tensor<2xbf16>
graph.weight @norm : tensor<16xbf16>
graph.quantized_weight @q_proj {group = 8} : tensor<16x8xi4>
graph.weight @beta : tensor<2x16xbf16>
graph.weight @gamma : tensor<2x16xbf16>
func.func @decode_step(%x: tensor<16xbf16>) {
  %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<16xbf16>
  %q = graph.linear_w4a16 %x, @q_proj : tensor<16xbf16> -> tensor<8xbf16>
  %b = graph.linear_bf16 %n, @beta : tensor<16xbf16> -> tensor<2xbf16>
  %c = graph.linear_bf16 %n, @gamma : tensor<16xbf16> -> tensor<2xbf16>
  return
}

// -----

// Not grouped: a projection whose only use is a residual add (it
// accumulates in fp32 on its own; phase formation refuses it in a group),
// so q_proj is left alone too. A mark already in the input is replaced.
// CHECK-LABEL: func.func @decode_step
// CHECK: graph.linear_w4a16 %{{.*}}, @q_proj : tensor<16xbf16> -> tensor<8xbf16>
// CHECK: graph.linear_w4a16 %{{.*}}, @o_proj : tensor<16xbf16> -> tensor<16xbf16>
// CHECK-NOT: fusion_group
graph.weight @norm : tensor<16xbf16>
graph.quantized_weight @q_proj {group = 8} : tensor<16x8xi4>
graph.quantized_weight @o_proj {group = 8} : tensor<16x16xi4>
func.func @decode_step(%x: tensor<16xbf16>) -> tensor<16xbf16> {
  %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<16xbf16>
  %q = graph.linear_w4a16 %n, @q_proj {schedule.fusion_group = "stale.group"} : tensor<16xbf16> -> tensor<8xbf16>
  %o = graph.linear_w4a16 %n, @o_proj : tensor<16xbf16> -> tensor<16xbf16>
  %h = graph.add %x, %o : tensor<16xbf16>
  return %h : tensor<16xbf16>
}

// -----

// W4A16 siblings of different quantization group sizes: one group per
// size (a GEMV task reads weights of one group size), the bf16 sibling
// with the first; a size with one member stays alone.
// CHECK-LABEL: func.func @decode_step
// CHECK: graph.linear_w4a16 %{{.*}}, @a {schedule.fusion_group = "a.group"}
// CHECK: graph.linear_w4a16 %{{.*}}, @b {schedule.fusion_group = "b.group"}
// CHECK: graph.linear_w4a16 %{{.*}}, @c {schedule.fusion_group = "a.group"}
// CHECK: graph.linear_w4a16 %{{.*}}, @d {schedule.fusion_group = "b.group"}
// CHECK: graph.linear_w4a16 %{{.*}}, @e : tensor<16xbf16> -> tensor<8xbf16>
// CHECK: graph.linear_bf16 %{{.*}}, @beta {schedule.fusion_group = "a.group"}
graph.weight @norm : tensor<16xbf16>
graph.quantized_weight @a {group = 8} : tensor<16x8xi4>
graph.quantized_weight @b {group = 16} : tensor<16x8xi4>
graph.quantized_weight @c {group = 8} : tensor<16x8xi4>
graph.quantized_weight @d {group = 16} : tensor<16x8xi4>
graph.quantized_weight @e {group = 4} : tensor<16x8xi4>
graph.weight @beta : tensor<2x16xbf16>
func.func @decode_step(%x: tensor<16xbf16>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<2xbf16>) {
  %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<16xbf16>
  %a = graph.linear_w4a16 %n, @a : tensor<16xbf16> -> tensor<8xbf16>
  %b = graph.linear_w4a16 %n, @b : tensor<16xbf16> -> tensor<8xbf16>
  %c = graph.linear_w4a16 %n, @c : tensor<16xbf16> -> tensor<8xbf16>
  %d = graph.linear_w4a16 %n, @d : tensor<16xbf16> -> tensor<8xbf16>
  %e = graph.linear_w4a16 %n, @e : tensor<16xbf16> -> tensor<8xbf16>
  %be = graph.linear_bf16 %n, @beta : tensor<16xbf16> -> tensor<2xbf16>
  return %a, %b, %c, %d, %e, %be : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<2xbf16>
}
