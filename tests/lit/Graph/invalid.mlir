// RUN: mk-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{input dim 100 is not divisible by the group size 32}}
graph.quantized_weight @w {group = 32} : tensor<100x64xi4>

// -----

// expected-error @+1 {{group size must be positive and even, got 7}}
graph.quantized_weight @w {group = 7} : tensor<14x64xi4>

// -----

// expected-error @+1 {{quantized weight must have i4 elements}}
graph.quantized_weight @w {group = 32} : tensor<64x64xi8>

// -----

// expected-error @+1 {{quantized weight must be [in, out] or [experts, in, out]}}
graph.quantized_weight @w {group = 32} : tensor<64xi4>

// -----

// expected-error @+1 {{weight must have bf16 or f32 elements}}
graph.weight @w : tensor<64xf16>

// -----

// expected-error @+1 {{only the leading (row) dimension of a state may be dynamic}}
graph.state @s : tensor<4x?xbf16>

// -----

// expected-error @+1 {{layer must be >= 0, got -1}}
graph.state @s : tensor<4xf32> layer -1

// -----

// expected-error @+1 {{layer must be >= 0, got -2}}
graph.quantized_weight @q {group = 8} : tensor<16x8xi4> layer -2

// -----

func.func @f() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  graph.weight @w : tensor<64xbf16>
  return
}

// -----

func.func @f(%x: tensor<64xbf16>) -> tensor<32xbf16> {
  // expected-error @+1 {{weight @missing does not name a symbol of the module}}
  %y = graph.linear_w4a16 %x, @missing : tensor<64xbf16> -> tensor<32xbf16>
  return %y : tensor<32xbf16>
}

// -----

graph.weight @w : tensor<64x32xbf16>
func.func @f(%x: tensor<64xbf16>) -> tensor<32xbf16> {
  // expected-error @+1 {{weight @w must be a 'graph.quantized_weight', but it is a 'graph.weight'}}
  %y = graph.linear_w4a16 %x, @w : tensor<64xbf16> -> tensor<32xbf16>
  return %y : tensor<32xbf16>
}

// -----

graph.quantized_weight @w {group = 32} : tensor<64x16xi4>
func.func @f(%x: tensor<64xbf16>) -> tensor<32xbf16> {
  // expected-error @+1 {{weight @w has type 'tensor<64x16xi4>', expected shape [64, 32]}}
  %y = graph.linear_w4a16 %x, @w : tensor<64xbf16> -> tensor<32xbf16>
  return %y : tensor<32xbf16>
}

// -----

graph.quantized_weight @w {group = 32} : tensor<64x32xi4>
func.func @f(%x: tensor<64xf32>) -> tensor<32xbf16> {
  // expected-error @+1 {{operand #0 must be statically shaped 1-D tensor of bf16}}
  %y = graph.linear_w4a16 %x, @w : tensor<64xf32> -> tensor<32xbf16>
  return %y : tensor<32xbf16>
}

// -----

graph.quantized_weight @w {group = 32} : tensor<64x32xi4>
func.func @f(%x: tensor<64xbf16>) -> tensor<64xbf16> {
  // expected-error @+1 {{weight @w must be a 'graph.weight', but it is a 'graph.quantized_weight'}}
  %y = graph.linear_bf16 %x, @w : tensor<64xbf16> -> tensor<64xbf16>
  return %y : tensor<64xbf16>
}

// -----

graph.weight @w : tensor<64x2xbf16>
func.func @f(%x: tensor<64xbf16>) -> tensor<2xbf16> {
  // expected-error @+1 {{weight @w has type 'tensor<64x2xbf16>', expected shape [2, 64]}}
  %y = graph.linear_bf16 %x, @w : tensor<64xbf16> -> tensor<2xbf16>
  return %y : tensor<2xbf16>
}

// -----

graph.weight @norm : tensor<32xbf16>
func.func @f(%x: tensor<64xbf16>) -> tensor<64xbf16> {
  // expected-error @+1 {{weight @norm has type 'tensor<32xbf16>', expected shape [64]}}
  %y = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<64xbf16>
  return %y : tensor<64xbf16>
}

// -----

graph.weight @norm : tensor<64xbf16>
func.func @f(%x: tensor<64xbf16>) -> tensor<64xbf16> {
  // expected-error @+1 {{eps must be positive}}
  %y = graph.rmsnorm %x, @norm eps(0.0) : tensor<64xbf16>
  return %y : tensor<64xbf16>
}

// -----

func.func @f(%x: tensor<64xbf16>, %y: tensor<32xbf16>) -> tensor<64xbf16> {
  // expected-error @+1 {{failed to verify that all of {lhs, rhs, output} have same type}}
  %z = "graph.add"(%x, %y) : (tensor<64xbf16>, tensor<32xbf16>) -> tensor<64xbf16>
  return %z : tensor<64xbf16>
}

// -----

graph.weight @conv : tensor<3x8x4xbf16>
func.func @f(%x: tensor<8xbf16>, %w: tensor<3x8xbf16>) {
  // expected-error @+1 {{conv_index must be 0 (q), 1 (k) or 2 (v), got 3}}
  %o, %w1 = graph.kda_short_conv %x, %w, @conv[3] : tensor<8xbf16>, tensor<3x8xbf16>
  return
}

// -----

graph.weight @conv : tensor<3x8x4xbf16>
func.func @f(%x: tensor<8xbf16>, %w: tensor<3x8xbf16>) {
  // expected-error @+1 {{conv_index must be 0 (q), 1 (k) or 2 (v), got -1}}
  %o, %w1 = graph.kda_short_conv %x, %w, @conv[-1] : tensor<8xbf16>, tensor<3x8xbf16>
  return
}

// -----

graph.weight @conv : tensor<3x8x3xbf16>
func.func @f(%x: tensor<8xbf16>, %w: tensor<3x8xbf16>) {
  // expected-error @+1 {{weight @conv has type 'tensor<3x8x3xbf16>', expected shape [3, 8, 4]}}
  %o, %w1 = graph.kda_short_conv %x, %w, @conv[0] : tensor<8xbf16>, tensor<3x8xbf16>
  return
}

// -----

graph.weight @conv : tensor<3x8x4xbf16>
func.func @f(%x: tensor<8xbf16>, %w: tensor<3x4xbf16>) {
  // expected-error @+1 {{window 'tensor<3x4xbf16>' must have 8 channels, like the input}}
  %o, %w1 = graph.kda_short_conv %x, %w, @conv[0] : tensor<8xbf16>, tensor<3x4xbf16>
  return
}

// -----

func.func @f(%q: tensor<8xbf16>, %b: tensor<2xbf16>, %s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{q/k/v/g have 8 channels, but heads * head_dim = 12}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(3) head_dim(4) : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
  return
}

// -----

func.func @f(%q: tensor<8xbf16>, %b: tensor<2xbf16>, %s: tensor<2x4x8xf32>) {
  // expected-error @+1 {{state 'tensor<2x4x8xf32>' must be [2, 4, 4]}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(2) head_dim(4) : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<8xbf16>, %b: tensor<4xbf16>, %s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{beta_logits 'tensor<4xbf16>' must have one entry per head (2)}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(2) head_dim(4) : tensor<8xbf16>, tensor<4xbf16>, tensor<2x4x4xf32>
  return
}

// -----

// The released form's decay takes its two fp32 parameters together.
graph.weight @a_log : tensor<2xf32>
func.func @f(%q: tensor<8xbf16>, %b: tensor<2xbf16>, %s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{takes a_log and dt_bias together (the low-rank decay), got only a_log}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(2) head_dim(4) {a_log = @a_log} : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
  return
}

// -----

graph.weight @a_log : tensor<2xbf16>
graph.weight @dt_bias : tensor<8xf32>
func.func @f(%q: tensor<8xbf16>, %b: tensor<2xbf16>, %s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{a_log @a_log must have f32 elements, got 'tensor<2xbf16>'}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(2) head_dim(4) {a_log = @a_log, dt_bias = @dt_bias} : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
  return
}

// -----

graph.weight @a_log : tensor<2xf32>
graph.weight @dt_bias : tensor<4xf32>
func.func @f(%q: tensor<8xbf16>, %b: tensor<2xbf16>, %s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{dt_bias @dt_bias has type 'tensor<4xf32>', expected shape [8]}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(2) head_dim(4) {a_log = @a_log, dt_bias = @dt_bias} : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
  return
}

// -----

func.func @f(%q: tensor<8xbf16>, %b: tensor<2xbf16>, %s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{qk_l2_eps must be positive}}
  %o, %s1 = graph.kda_gated_delta %q, %q, %q, %q, %b, %s heads(2) head_dim(4) {qk_l2_eps = 0.0 : f64} : tensor<8xbf16>, tensor<2xbf16>, tensor<2x4x4xf32>
  return
}

// -----

graph.weight @o_norm : tensor<4xbf16>
func.func @f(%o: tensor<8xbf16>) {
  // expected-error @+1 {{input has 8 channels, but heads * head_dim = 12}}
  %z = graph.kda_gated_norm %o, %o, @o_norm heads(3) head_dim(4) eps(1.0e-05) : tensor<8xbf16>
  return
}

// -----

graph.weight @o_norm : tensor<4xf32>
func.func @f(%o: tensor<8xbf16>) {
  // expected-error @+1 {{weight @o_norm must have bf16 elements, got 'tensor<4xf32>'}}
  %z = graph.kda_gated_norm %o, %o, @o_norm heads(2) head_dim(4) eps(1.0e-05) : tensor<8xbf16>
  return
}

// -----

graph.weight @o_norm : tensor<8xbf16>
func.func @f(%o: tensor<8xbf16>) {
  // expected-error @+1 {{weight @o_norm has type 'tensor<8xbf16>', expected shape [4]}}
  %z = graph.kda_gated_norm %o, %o, @o_norm heads(2) head_dim(4) eps(1.0e-05) : tensor<8xbf16>
  return
}

// -----

graph.weight @o_norm : tensor<4xbf16>
func.func @f(%o: tensor<8xbf16>) {
  // expected-error @+1 {{eps must be positive}}
  %z = graph.kda_gated_norm %o, %o, @o_norm heads(2) head_dim(4) eps(0.0) : tensor<8xbf16>
  return
}

// -----

// An f32 parameter where an op reads bf16 (a norm's weight).
graph.weight @norm : tensor<8xf32>
func.func @f(%x: tensor<8xbf16>) {
  // expected-error @+1 {{weight @norm must have bf16 elements, got 'tensor<8xf32>'}}
  %n = graph.rmsnorm %x, @norm eps(1.0e-06) : tensor<8xbf16>
  return
}

// -----

func.func @f(%q: tensor<2x8xbf16>, %pos: i32) {
  // expected-error @+1 {{rope_dim must be positive and even, got 3}}
  %r = graph.rope %q, %pos theta(10000.0) offset(4) rope_dim(3) : tensor<2x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<2x8xbf16>, %pos: i32) {
  // expected-error @+1 {{rotated range [6, 10) exceeds the last dimension (8)}}
  %r = graph.rope %q, %pos theta(10000.0) offset(6) rope_dim(4) : tensor<2x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<12xbf16>) {
  // expected-error @+1 {{slice [10, 14) is out of bounds of the last dimension (12)}}
  %s = graph.slice %x[10] : tensor<12xbf16> -> tensor<4xbf16>
  return
}

// -----

func.func @f(%x: tensor<12xbf16>) {
  // expected-error @+1 {{element counts differ}}
  %s = graph.reshape %x : tensor<12xbf16> -> tensor<2x4xbf16>
  return
}

// -----

func.func @f(%c: tensor<4x8xbf16>, %r: tensor<8xbf16>) {
  // expected-error @+1 {{must have a dynamic row dimension}}
  %c1 = graph.mla_cache_append %c, %r : tensor<4x8xbf16>, tensor<8xbf16>
  return
}

// -----

func.func @f(%c: tensor<?x8xbf16>, %r: tensor<4xbf16>) {
  // expected-error @+1 {{row 'tensor<4xbf16>' does not match the cache width}}
  %c1 = graph.mla_cache_append %c, %r : tensor<?x8xbf16>, tensor<4xbf16>
  return
}

// -----

graph.quantized_weight @kv_b {group = 8} : tensor<8x16xi4>
func.func @f(%q: tensor<2x6xbf16>, %c: tensor<?x8xbf16>, %k: tensor<?x4xbf16>) {
  // expected-error @+1 {{q 'tensor<2x6xbf16>' must be [2, 8] (heads, qk_nope + qk_rope)}}
  %o = graph.mla_attention %q, %c, %k, @kv_b heads(2) qk_nope(4) qk_rope(4) v_head(4) : tensor<2x6xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
  return
}

// -----

graph.quantized_weight @kv_b {group = 8} : tensor<8x12xi4>
func.func @f(%q: tensor<2x8xbf16>, %c: tensor<?x8xbf16>, %k: tensor<?x4xbf16>) {
  // expected-error @+1 {{kv_b @kv_b has type 'tensor<8x12xi4>', expected shape [8, 16]}}
  %o = graph.mla_attention %q, %c, %k, @kv_b heads(2) qk_nope(4) qk_rope(4) v_head(4) : tensor<2x8xbf16>, tensor<?x8xbf16>, tensor<?x4xbf16> -> tensor<8xbf16>
  return
}

// -----

graph.weight @router : tensor<4x16xbf16>
func.func @f(%u: tensor<16xbf16>) {
  // expected-error @+1 {{top_k (8) exceeds the 4 experts of @router}}
  %w, %i = graph.moe_router %u, @router top_k(8) scaling(2.446) : tensor<16xbf16> -> tensor<8xf32>, tensor<8xi32>
  return
}

// -----

graph.weight @router : tensor<4x16xbf16>
graph.weight @bias : tensor<5xbf16>
func.func @f(%u: tensor<16xbf16>) {
  // expected-error @+1 {{bias @bias has type 'tensor<5xbf16>', expected shape [4]}}
  %w, %i = graph.moe_router %u, @router bias(@bias) top_k(2) scaling(2.446) : tensor<16xbf16> -> tensor<2xf32>, tensor<2xi32>
  return
}

// -----

graph.weight @router : tensor<4x16xbf16>
func.func @f(%u: tensor<16xbf16>) {
  // expected-error @+1 {{weights and indices must have top_k (2) entries}}
  %w, %i = graph.moe_router %u, @router top_k(2) scaling(2.446) : tensor<16xbf16> -> tensor<3xf32>, tensor<3xi32>
  return
}

// -----

graph.quantized_weight @gate {group = 8} : tensor<4x16x8xi4>
graph.quantized_weight @up {group = 8} : tensor<4x16x8xi4>
graph.quantized_weight @down {group = 8} : tensor<4x8x32xi4>
func.func @f(%u: tensor<16xbf16>, %w: tensor<2xf32>, %i: tensor<2xi32>) {
  // expected-error @+1 {{down @down has type 'tensor<4x8x32xi4>', expected shape [4, 8, 16]}}
  %r = graph.moe_experts %u, %w, %i gate(@gate) up(@up) down(@down) : tensor<16xbf16>, tensor<2xf32>, tensor<2xi32> -> tensor<16xf32>
  return
}

// -----

graph.quantized_weight @gate {group = 8} : tensor<8x16x8xi4>
graph.quantized_weight @up {group = 8} : tensor<4x16x8xi4>
graph.quantized_weight @down {group = 8} : tensor<4x8x16xi4>
func.func @f(%u: tensor<16xbf16>) {
  // expected-error @+1 {{up @up has type 'tensor<4x16x8xi4>', expected shape [8, 16, 8]}}
  %s = graph.shared_experts %u gate(@gate) up(@up) down(@down) : tensor<16xbf16> -> tensor<16xf32>
  return
}

// -----

graph.quantized_weight @gate {group = 8} : tensor<2x16x8xi4>
graph.quantized_weight @up {group = 8} : tensor<2x16x8xi4>
graph.quantized_weight @down {group = 8} : tensor<2x8x16xi4>
func.func @f(%u: tensor<16xbf16>, %w: tensor<4xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{routes to 4 experts out of only 2}}
  %r = graph.moe_experts %u, %w, %i gate(@gate) up(@up) down(@down) : tensor<16xbf16>, tensor<4xf32>, tensor<4xi32> -> tensor<16xf32>
  return
}

// -----

func.func @f(%r: tensor<16xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{shared 'tensor<8xf32>' must match routed 'tensor<16xf32>'}}
  %m = graph.moe_combine %r, %s : tensor<16xf32>, tensor<8xf32> -> tensor<16xbf16>
  return
}

// -----

// expected-error @+1 {{argument #0 is tied to undefined state @nope}}
func.func @f(%s: tensor<4xbf16> {graph.state = @nope}) {
  return
}

// -----

graph.state @s : tensor<2x4x4xf32>
// expected-error @+1 {{argument #0 has type 'tensor<2x4x8xf32>' but state @s is 'tensor<2x4x4xf32>'}}
func.func @f(%s: tensor<2x4x8xf32> {graph.state = @s}) {
  return
}

// -----

graph.weight @w : tensor<4xbf16>
// expected-error @+1 {{result #0 is tied to @w, a 'graph.weight', not a 'graph.state'}}
func.func @f(%s: tensor<4xbf16>) -> (tensor<4xbf16> {graph.state = @w}) {
  return %s : tensor<4xbf16>
}

// -----

// expected-error @+1 {{'graph.state' on argument #0 must be a flat symbol reference}}
func.func @f(%s: tensor<4xbf16> {graph.state = 3 : i32}) {
  return
}

// -----

// A dense FFN: one expert as plain linears; they must agree.
graph.quantized_weight @gate {group = 8} : tensor<16x8xi4>
graph.quantized_weight @up {group = 8} : tensor<4x16x8xi4>
graph.quantized_weight @down {group = 8} : tensor<8x16xi4>
func.func @f(%u: tensor<16xbf16>) {
  // expected-error @+1 {{up @up has type 'tensor<4x16x8xi4>', expected shape [16, 8]}}
  %s = graph.shared_experts %u gate(@gate) up(@up) down(@down) : tensor<16xbf16> -> tensor<16xf32>
  return
}

// -----

graph.weight @qn : tensor<32xbf16>
func.func @f(%q: tensor<4x64xbf16>) {
  // expected-error @+1 {{weight @qn has type 'tensor<32xbf16>', expected shape [64]}}
  %n = graph.head_rmsnorm %q, @qn eps(1.0e-06) : tensor<4x64xbf16>
  return
}

// -----

func.func @f(%c: tensor<?x2x64xbf16>, %r: tensor<4x64xbf16>) {
  // expected-error @+1 {{row 'tensor<4x64xbf16>' does not match the cache's rows of 'tensor<?x2x64xbf16>'}}
  %c1 = graph.kv_cache_append %c, %r : tensor<?x2x64xbf16>, tensor<4x64xbf16>
  return
}

// -----

func.func @f(%c: tensor<8x2x64xbf16>, %r: tensor<2x64xbf16>) {
  // expected-error @+1 {{cache 'tensor<8x2x64xbf16>' must have a dynamic row dimension}}
  %c1 = graph.kv_cache_append %c, %r : tensor<8x2x64xbf16>, tensor<2x64xbf16>
  return
}

// -----

func.func @f(%q: tensor<5x64xbf16>, %k: tensor<?x2x64xbf16>, %v: tensor<?x2x64xbf16>) {
  // expected-error @+1 {{q's 5 heads must be a multiple of the caches' 2 kv heads}}
  %o = graph.gqa_attention %q, %k, %v : tensor<5x64xbf16>, tensor<?x2x64xbf16> -> tensor<320xbf16>
  return
}

// -----

func.func @f(%q: tensor<4x64xbf16>, %k: tensor<?x2x32xbf16>, %v: tensor<?x2x32xbf16>) {
  // expected-error @+1 {{q 'tensor<4x64xbf16>' and the caches 'tensor<?x2x32xbf16>' must have one head_dim}}
  %o = graph.gqa_attention %q, %k, %v : tensor<4x64xbf16>, tensor<?x2x32xbf16> -> tensor<256xbf16>
  return
}

// -----

func.func @f(%q: tensor<4x64xbf16>, %k: tensor<?x2x64xbf16>, %v: tensor<?x2x64xbf16>) {
  // expected-error @+1 {{result 'tensor<128xbf16>' must have heads * head_dim = 256 elements}}
  %o = graph.gqa_attention %q, %k, %v : tensor<4x64xbf16>, tensor<?x2x64xbf16> -> tensor<128xbf16>
  return
}

// -----

// An embedding row is as wide as the table's rows.
graph.weight @embed : tensor<16x8xbf16>
func.func @f(%t: i32) {
  // expected-error @+1 {{weight @embed has type 'tensor<16x8xbf16>', expected shape [?, 4]}}
  %x = graph.embedding %t, @embed : tensor<4xbf16>
  return
}

// -----

// Rounding the parts apart needs two parts.
func.func @f(%r: tensor<16xf32>) {
  // expected-error @+1 {{rounds its parts apart (round_parts) but has only one}}
  %m = graph.moe_combine %r round_parts : tensor<16xf32> -> tensor<16xbf16>
  return
}
