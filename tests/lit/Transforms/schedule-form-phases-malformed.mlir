// RUN: mk-opt %s -split-input-file -verify-diagnostics --schedule-form-phases

// Graph modules the lowering has no rule for are located errors, never a
// crash (each of these once dereferenced what was not there): no hidden
// argument, no body, a non-tensor hidden argument, a bare return, a state
// tied twice, KDA's q or MLA's q not coming straight from their producers,
// KDA convs that are not slices 0, 1, 2 of one weight, MLA ropes that do
// not match the attention's dims or each other's theta, one fusion group
// over two inputs, GQA heads rotated other than whole and rotate-half, q
// and k with different thetas, a key row not normalized and rotated, a
// head norm of what is not a stored projection.

module @m {
  // expected-error @+1 {{argument 0 must be the hidden vector, a static 1-D bf16 tensor}}
  func.func @decode_step() {
    return
  }
}

// -----

module @m {
  // expected-error @+1 {{has no body to lower}}
  func.func private @decode_step(tensor<64xbf16>) -> tensor<64xbf16>
}

// -----

module @m {
  // expected-error @+1 {{argument 0 must be the hidden vector, a static 1-D bf16 tensor, or (the whole model) an i32 token id}}
  func.func @decode_step(%p: f32, %x: tensor<64xbf16>) -> tensor<64xbf16> {
    return %x : tensor<64xbf16>
  }
}

// -----

module @m {
  // expected-error @+1 {{argument 0, a token id, has no graph.embedding lookup}}
  func.func @decode_step(%t: i32, %x: tensor<64xbf16>) -> tensor<64xbf16> {
    return %x : tensor<64xbf16>
  }
}

// -----

module @m {
  func.func @decode_step(%x: tensor<64xbf16>) {
    // expected-error @+1 {{must return the new hidden state}}
    return
  }
}

// -----

module @m {
  graph.state @state.0.S : tensor<2x8x8xf32>
  // expected-error @+1 {{arguments tie graph.state @state.0.S twice}}
  func.func @decode_step(%x: tensor<64xbf16>, %a: tensor<2x8x8xf32> {graph.state = @state.0.S}, %b: tensor<2x8x8xf32> {graph.state = @state.0.S}) -> tensor<64xbf16> {
    return %x : tensor<64xbf16>
  }
}

// -----

module @unit attributes {mk.config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}} {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.k_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.v_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.g_proj {group = 16} : tensor<64x16xi4>
  graph.weight @blocks.0.attn.beta_proj.weight : tensor<2x64xbf16>
  graph.weight @blocks.0.attn.conv_w : tensor<3x16x4xbf16>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4>
  graph.weight @blocks.0.moe_norm : tensor<64xbf16>
  graph.weight @blocks.0.moe.router.weight : tensor<4x64xbf16>
  graph.quantized_weight @blocks.0.moe.gate {group = 32} : tensor<4x64x32xi4>
  graph.quantized_weight @blocks.0.moe.up {group = 32} : tensor<4x64x32xi4>
  graph.quantized_weight @blocks.0.moe.down {group = 32} : tensor<4x32x64xi4>
  graph.quantized_weight @blocks.0.moe.s_gate {group = 32} : tensor<1x64x32xi4>
  graph.quantized_weight @blocks.0.moe.s_up {group = 32} : tensor<1x64x32xi4>
  graph.quantized_weight @blocks.0.moe.s_down {group = 32} : tensor<1x32x64xi4>
  graph.state @state.0.S : tensor<2x8x8xf32>
  graph.state @state.0.cq : tensor<3x16xbf16>
  graph.state @state.0.ck : tensor<3x16xbf16>
  graph.state @state.0.cv : tensor<3x16xbf16>
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
    %qr = graph.reshape %qc : tensor<16xbf16> -> tensor<16xbf16>
    // expected-error @+1 {{q must come directly from graph.kda_short_conv}}
    %o, %S1 = graph.kda_gated_delta %qr, %kc, %vc, %g, %b, %S heads(2) head_dim(8) : tensor<16xbf16>, tensor<2xbf16>, tensor<2x8x8xf32>
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

module @mla {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x24xi4>
  graph.quantized_weight @blocks.0.attn.kv_a {group = 16} : tensor<64x20xi4>
  graph.quantized_weight @blocks.0.attn.kv_b {group = 16} : tensor<16x32xi4>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4>
  graph.state @state.0.c_kv : tensor<?x16xbf16>
  graph.state @state.0.k_rope : tensor<?x4xbf16>
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
    %qr2 = graph.reshape %qr : tensor<2x12xbf16> -> tensor<2x12xbf16>
    // expected-error @+1 {{q must come directly from graph.rope}}
    %o = graph.mla_attention %qr2, %ckv1, %kr2, @blocks.0.attn.kv_b heads(2) qk_nope(8) qk_rope(4) v_head(8) {schedule.absorbed} : tensor<2x12xbf16>, tensor<?x16xbf16>, tensor<?x4xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// k takes the q slice of the conv weight.
module @unit attributes {mk.config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}} {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.k_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.v_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.g_proj {group = 16} : tensor<64x16xi4>
  graph.weight @blocks.0.attn.beta_proj.weight : tensor<2x64xbf16>
  graph.weight @blocks.0.attn.conv_w : tensor<3x16x4xbf16>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4>
  graph.weight @blocks.0.moe_norm : tensor<64xbf16>
  graph.weight @blocks.0.moe.router.weight : tensor<4x64xbf16>
  graph.quantized_weight @blocks.0.moe.gate {group = 32} : tensor<4x64x32xi4>
  graph.quantized_weight @blocks.0.moe.up {group = 32} : tensor<4x64x32xi4>
  graph.quantized_weight @blocks.0.moe.down {group = 32} : tensor<4x32x64xi4>
  graph.quantized_weight @blocks.0.moe.s_gate {group = 32} : tensor<1x64x32xi4>
  graph.quantized_weight @blocks.0.moe.s_up {group = 32} : tensor<1x64x32xi4>
  graph.quantized_weight @blocks.0.moe.s_down {group = 32} : tensor<1x32x64xi4>
  graph.state @state.0.S : tensor<2x8x8xf32>
  graph.state @state.0.cq : tensor<3x16xbf16>
  graph.state @state.0.ck : tensor<3x16xbf16>
  graph.state @state.0.cv : tensor<3x16xbf16>
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %S: tensor<2x8x8xf32> {graph.state = @state.0.S}, %cq: tensor<3x16xbf16> {graph.state = @state.0.cq}, %ck: tensor<3x16xbf16> {graph.state = @state.0.ck}, %cv: tensor<3x16xbf16> {graph.state = @state.0.cv}) -> (tensor<64xbf16>, tensor<2x8x8xf32> {graph.state = @state.0.S}, tensor<3x16xbf16> {graph.state = @state.0.cq}, tensor<3x16xbf16> {graph.state = @state.0.ck}, tensor<3x16xbf16> {graph.state = @state.0.cv}) {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %k = graph.linear_w4a16 %n, @blocks.0.attn.k_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %v = graph.linear_w4a16 %n, @blocks.0.attn.v_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %g = graph.linear_w4a16 %n, @blocks.0.attn.g_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %b = graph.linear_bf16 %n, @blocks.0.attn.beta_proj.weight {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<2xbf16>
    %qc, %cq1 = graph.kda_short_conv %q, %cq, @blocks.0.attn.conv_w[0] : tensor<16xbf16>, tensor<3x16xbf16>
    %kc, %ck1 = graph.kda_short_conv %k, %ck, @blocks.0.attn.conv_w[0] : tensor<16xbf16>, tensor<3x16xbf16>
    %vc, %cv1 = graph.kda_short_conv %v, %cv, @blocks.0.attn.conv_w[2] : tensor<16xbf16>, tensor<3x16xbf16>
    // expected-error @+1 {{q, k and v must be kda_short_conv slices 0, 1 and 2 of one weight (@blocks.0.attn.conv_w)}}
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

// q's rope on the wrong dims.
module @mla {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x24xi4>
  graph.quantized_weight @blocks.0.attn.kv_a {group = 16} : tensor<64x20xi4>
  graph.quantized_weight @blocks.0.attn.kv_b {group = 16} : tensor<16x32xi4>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4>
  graph.state @state.0.c_kv : tensor<?x16xbf16>
  graph.state @state.0.k_rope : tensor<?x4xbf16>
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %ckv: tensor<?x16xbf16> {graph.state = @state.0.c_kv}, %kr: tensor<?x4xbf16> {graph.state = @state.0.k_rope}) -> tensor<64xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<24xbf16>
    %q2 = graph.reshape %q : tensor<24xbf16> -> tensor<2x12xbf16>
    %qr = graph.rope %q2, %pos theta(10000.0) offset(0) rope_dim(4) : tensor<2x12xbf16>
    %kv = graph.linear_w4a16 %n, @blocks.0.attn.kv_a {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<20xbf16>
    %c = graph.slice %kv[0] : tensor<20xbf16> -> tensor<16xbf16>
    %k = graph.slice %kv[16] : tensor<20xbf16> -> tensor<4xbf16>
    %kr1 = graph.rope %k, %pos theta(10000.0) offset(0) rope_dim(4) : tensor<4xbf16>
    %ckv1 = graph.mla_cache_append %ckv, %c : tensor<?x16xbf16>, tensor<16xbf16>
    %kr2 = graph.mla_cache_append %kr, %kr1 : tensor<?x4xbf16>, tensor<4xbf16>
    // expected-error @+1 {{q's rope must rotate dims [qk_nope, qk_nope + qk_rope) = [8, 12) of each head}}
    %o = graph.mla_attention %qr, %ckv1, %kr2, @blocks.0.attn.kv_b heads(2) qk_nope(8) qk_rope(4) v_head(8) {schedule.absorbed} : tensor<2x12xbf16>, tensor<?x16xbf16>, tensor<?x4xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// The k-rope row rotated with another theta.
module @mla {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x24xi4>
  graph.quantized_weight @blocks.0.attn.kv_a {group = 16} : tensor<64x20xi4>
  graph.quantized_weight @blocks.0.attn.kv_b {group = 16} : tensor<16x32xi4>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4>
  graph.state @state.0.c_kv : tensor<?x16xbf16>
  graph.state @state.0.k_rope : tensor<?x4xbf16>
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %ckv: tensor<?x16xbf16> {graph.state = @state.0.c_kv}, %kr: tensor<?x4xbf16> {graph.state = @state.0.k_rope}) -> tensor<64xbf16> {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<24xbf16>
    %q2 = graph.reshape %q : tensor<24xbf16> -> tensor<2x12xbf16>
    %qr = graph.rope %q2, %pos theta(10000.0) offset(8) rope_dim(4) : tensor<2x12xbf16>
    %kv = graph.linear_w4a16 %n, @blocks.0.attn.kv_a {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<20xbf16>
    %c = graph.slice %kv[0] : tensor<20xbf16> -> tensor<16xbf16>
    %k = graph.slice %kv[16] : tensor<20xbf16> -> tensor<4xbf16>
    %kr1 = graph.rope %k, %pos theta(500000.0) offset(0) rope_dim(4) : tensor<4xbf16>
    %ckv1 = graph.mla_cache_append %ckv, %c : tensor<?x16xbf16>, tensor<16xbf16>
    %kr2 = graph.mla_cache_append %kr, %kr1 : tensor<?x4xbf16>, tensor<4xbf16>
    // expected-error @+1 {{the k-rope row must be graph.rope of all its 4 dims with q's theta}}
    %o = graph.mla_attention %qr, %ckv1, %kr2, @blocks.0.attn.kv_b heads(2) qk_nope(8) qk_rope(4) v_head(8) {schedule.absorbed} : tensor<2x12xbf16>, tensor<?x16xbf16>, tensor<?x4xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

// One fusion group name on linears of two inputs.
module @unit attributes {mk.config = {config = {group = 16 : i64, hidden = 64 : i64}, name = "unit"}} {
  graph.weight @blocks.0.attn_norm : tensor<64xbf16>
  graph.quantized_weight @blocks.0.attn.q_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.k_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.v_proj {group = 16} : tensor<64x16xi4>
  graph.quantized_weight @blocks.0.attn.g_proj {group = 16} : tensor<64x16xi4>
  graph.weight @blocks.0.attn.beta_proj.weight : tensor<2x64xbf16>
  graph.weight @blocks.0.attn.conv_w : tensor<3x16x4xbf16>
  graph.quantized_weight @blocks.0.attn.o_proj {group = 16} : tensor<16x64xi4>
  graph.weight @blocks.0.moe_norm : tensor<64xbf16>
  graph.weight @blocks.0.moe.router.weight : tensor<4x64xbf16>
  graph.quantized_weight @blocks.0.moe.gate {group = 32} : tensor<4x64x32xi4>
  graph.quantized_weight @blocks.0.moe.up {group = 32} : tensor<4x64x32xi4>
  graph.quantized_weight @blocks.0.moe.down {group = 32} : tensor<4x32x64xi4>
  graph.quantized_weight @blocks.0.moe.s_gate {group = 32} : tensor<1x64x32xi4>
  graph.quantized_weight @blocks.0.moe.s_up {group = 32} : tensor<1x64x32xi4>
  graph.quantized_weight @blocks.0.moe.s_down {group = 32} : tensor<1x32x64xi4>
  graph.state @state.0.S : tensor<2x8x8xf32>
  graph.state @state.0.cq : tensor<3x16xbf16>
  graph.state @state.0.ck : tensor<3x16xbf16>
  graph.state @state.0.cv : tensor<3x16xbf16>
  func.func @decode_step(%x: tensor<64xbf16>, %pos: i32, %S: tensor<2x8x8xf32> {graph.state = @state.0.S}, %cq: tensor<3x16xbf16> {graph.state = @state.0.cq}, %ck: tensor<3x16xbf16> {graph.state = @state.0.ck}, %cv: tensor<3x16xbf16> {graph.state = @state.0.cv}) -> (tensor<64xbf16>, tensor<2x8x8xf32> {graph.state = @state.0.S}, tensor<3x16xbf16> {graph.state = @state.0.cq}, tensor<3x16xbf16> {graph.state = @state.0.ck}, tensor<3x16xbf16> {graph.state = @state.0.cv}) {
    %n = graph.rmsnorm %x, @blocks.0.attn_norm eps(1.0e-06) : tensor<64xbf16>
    %q = graph.linear_w4a16 %n, @blocks.0.attn.q_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %k = graph.linear_w4a16 %n, @blocks.0.attn.k_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %v = graph.linear_w4a16 %n, @blocks.0.attn.v_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    %g = graph.linear_w4a16 %n, @blocks.0.attn.g_proj {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<16xbf16>
    // expected-error @+1 {{fusion group 'blocks.0.attn.q_proj.group' has members that read different inputs}}
    %b = graph.linear_bf16 %x, @blocks.0.attn.beta_proj.weight {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : tensor<64xbf16> -> tensor<2xbf16>
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

module @m {
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
    // expected-error @+1 {{a head-normalized input is rotated whole (offset 0, rope_dim 8) and rotate_half; no other form has a lowering}}
    %qr = graph.rope %qn, %pos theta(1000000.0) offset(0) rope_dim(8) : tensor<2x8xbf16>
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

module @m {
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
    %kr = graph.rope %kn, %pos theta(10000.0) offset(0) rope_dim(8) rotate_half : tensor<1x8xbf16>
    %v2 = graph.reshape %v : tensor<8xbf16> -> tensor<1x8xbf16>
    %kc1 = graph.kv_cache_append %kc, %kr : tensor<?x1x8xbf16>, tensor<1x8xbf16>
    %vc1 = graph.kv_cache_append %vc, %v2 : tensor<?x1x8xbf16>, tensor<1x8xbf16>
    // expected-error @+1 {{q and k must be rotated with one theta and normalized with one eps}}
    %o = graph.gqa_attention %qr, %kc1, %vc1 : tensor<2x8xbf16>, tensor<?x1x8xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

module @m {
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
    %kc1 = graph.kv_cache_append %kc, %k2 : tensor<?x1x8xbf16>, tensor<1x8xbf16>
    %vc1 = graph.kv_cache_append %vc, %v2 : tensor<?x1x8xbf16>, tensor<1x8xbf16>
    // expected-error @+1 {{the key row must be head-normalized and rotated as the queries are}}
    %o = graph.gqa_attention %qr, %kc1, %vc1 : tensor<2x8xbf16>, tensor<?x1x8xbf16> -> tensor<16xbf16>
    %a = graph.linear_w4a16 %o, @blocks.0.attn.o_proj : tensor<16xbf16> -> tensor<64xbf16>
    %h = graph.add %x, %a : tensor<64xbf16>
    return %h : tensor<64xbf16>
  }
}

// -----

module @m {
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
    %qx = graph.rope %q2, %pos theta(1000000.0) offset(0) rope_dim(8) : tensor<2x8xbf16>
    // expected-error @+1 {{expects a whole stored projection (its heads are normalized by the GQA append task)}}
    %qn = graph.head_rmsnorm %qx, @blocks.0.attn.q_norm eps(1.0e-06) : tensor<2x8xbf16>
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
