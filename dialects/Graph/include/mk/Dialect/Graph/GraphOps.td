//===- GraphOps.td - Ops of the graph dialect --------------*- tablegen -*-===//
//
// Op names are a contract with the schedule dialect and the emitter: keep them
// stable. Shapes below use the spec's names: d (hidden), C = H*Dk (KDA
// channels), Hm (MLA heads), E (experts), k (n_active), m (moe_inter).
//
//===----------------------------------------------------------------------===//

#ifndef MK_GRAPH_OPS_TD
#define MK_GRAPH_OPS_TD

include "mk/Dialect/Graph/GraphDialect.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

class Graph_StaticTensor<list<Type> elts, list<int> ranks, string desc>
    : Type<And<[TensorRankOf<elts, ranks>.predicate, HasStaticShapePred]>,
           "statically shaped " # desc, "::mlir::RankedTensorType">;

def Graph_BF16Vector : Graph_StaticTensor<[BF16], [1], "1-D tensor of bf16">;
def Graph_F32Vector : Graph_StaticTensor<[F32], [1], "1-D tensor of f32">;
def Graph_I32Vector : Graph_StaticTensor<[I32], [1], "1-D tensor of i32">;
def Graph_BF16Matrix : Graph_StaticTensor<[BF16], [2], "2-D tensor of bf16">;
def Graph_BF16VectorOrMatrix
    : Graph_StaticTensor<[BF16], [1, 2], "1-D or 2-D tensor of bf16">;
def Graph_F32Tensor3D : Graph_StaticTensor<[F32], [3], "3-D tensor of f32">;
def Graph_AnyStaticTensor
    : Graph_StaticTensor<[BF16, F32, I32], [1, 2, 3],
                         "tensor of bf16, f32 or i32">;
// A cache: rows (the context) by width; the row count is dynamic.
def Graph_BF16Cache : TensorRankOf<[BF16], [2]>;
def Graph_BF16HeadCache : TensorRankOf<[BF16], [3]>;

//===----------------------------------------------------------------------===//
// Module-level symbols: parameters and decode state
//===----------------------------------------------------------------------===//

def Graph_WeightOp : Graph_Op<"weight",
    [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A bf16 or f32 parameter tensor of the block";
  let description = [{
    Declares a bf16 parameter (norm weight, bf16 linear, conv taps) or an
    f32 one (the released KDA's `A_log` and `dt_bias`) under its
    state-dict name. The runtime binds a buffer of exactly this shape to it.
    `layer` (optional, >= 0) is the layer it belongs to, which the later
    stages read instead of parsing names (debug captures, the layer count).

    ```mlir
    graph.weight @"blocks.0.attn_norm" : tensor<2304xbf16> layer 0
    graph.weight @"blocks.0.attn.beta_proj.weight" : tensor<32x2304xbf16> layer 0
    graph.weight @"blocks.0.attn.A_log" : tensor<32xf32> layer 0
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<I64Attr>:$layer);
  let assemblyFormat = "$sym_name attr-dict `:` $type (`layer` $layer^)?";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Graph_QuantizedWeightOp : Graph_Op<"quantized_weight",
    [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A W4A16 (int4, group-quantized) linear weight";
  let description = [{
    The logical weight `W` of `y = x @ W`: `[in, out]`, or `[E, in, out]` for a
    stack of `E` experts, with one bf16 scale and zero per `group` input rows
    and output column. The runtime stores it as three tensors named
    `<sym>.w_q` (u8 `[E?, in/2, out]`, two nibbles per byte along `in`),
    `<sym>.scales` and `<sym>.zeros` (bf16 `[E?, in/group, out]`).

    `layer` as for `graph.weight`.

    ```mlir
    graph.quantized_weight @"blocks.0.attn.q_proj" {group = 128} : tensor<2304x4096xi4> layer 0
    graph.quantized_weight @"blocks.0.moe.gate" {group = 128} : tensor<64x2304x1024xi4> layer 0
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$group,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<I64Attr>:$layer);
  let assemblyFormat =
      "$sym_name ` ` `{` `group` `=` $group `}` attr-dict `:` $type (`layer` $layer^)?";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// Experts stacked on the leading axis; 0 for a plain linear.
    int64_t getNumExperts() {
      return getTensorType().getRank() == 3 ? getTensorType().getDimSize(0) : 0;
    }
    int64_t getInDim() {
      return getTensorType().getDimSize(getTensorType().getRank() - 2);
    }
    int64_t getOutDim() {
      return getTensorType().getDimSize(getTensorType().getRank() - 1);
    }
  }];
}

def Graph_StateOp : Graph_Op<"state", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A decode-state tensor carried across steps";
  let description = [{
    Declares a state tensor under its spec name. Caches have a dynamic leading
    (row) dimension: the context length, which grows by one row per step.
    `layer` as for `graph.weight`.

    ```mlir
    graph.state @"state.0.S" : tensor<32x128x128xf32> layer 0
    graph.state @"state.0.cq" : tensor<3x4096xbf16> layer 0
    graph.state @"state.3.c_kv" : tensor<?x512xbf16> layer 3
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<I64Attr>:$layer);
  let assemblyFormat = "$sym_name attr-dict `:` $type (`layer` $layer^)?";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

// Compute ops are pure (state is threaded as values) and name their results
// in printed IR (`%q_proj`, `%h`, ...) so that the IR of a block reads.
class Graph_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat(
          [Pure, DeclareOpInterfaceMethods<OpAsmOpInterface,
                                           ["getAsmResultNames"]>],
          traits)>;

class Graph_WeightUserOp<string mnemonic, list<Trait> traits = []>
    : Graph_ComputeOp<mnemonic, !listconcat(
          [DeclareOpInterfaceMethods<SymbolUserOpInterface>], traits)>;

def Graph_RMSNormOp : Graph_WeightUserOp<"rmsnorm",
    [AllTypesMatch<["input", "output"]>]> {
  let summary = "RMSNorm with a bf16 weight";
  let description = [{
    `y = bf16(f32(x) * rsqrt(mean(f32(x)^2) + eps) * f32(w))`; `weight` is a
    `graph.weight` of shape `[d]`. With `round_twice` (the released
    Kimi-Linear model's norms) the normalized value is rounded before the
    weight multiplies it: `y = bf16(bf16(f32(x) * rsqrt(...)) * f32(w))`.

    ```mlir
    %n = graph.rmsnorm %x, @"blocks.0.attn_norm" eps(1.0e-06) : tensor<2304xbf16>
    %m = graph.rmsnorm %x, @"blocks.0.attn_norm" eps(1.0e-05) {round_twice} : tensor<2304xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, FlatSymbolRefAttr:$weight,
                       F64Attr:$eps, UnitAttr:$round_twice);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $input `,` $weight `eps` `(` custom<Real>($eps) `)` attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Graph_LinearW4A16Op : Graph_WeightUserOp<"linear_w4a16"> {
  let summary = "y = x @ W with an int4 group-quantized W";
  let description = [{
    `x` bf16 `[in]`, `W` a `graph.quantized_weight` `[in, out]`; fp32
    accumulation of `f32(x) * f32(dequant(W))`, one final rounding to bf16.

    ```mlir
    %q = graph.linear_w4a16 %n, @"blocks.0.attn.q_proj" : tensor<2304xbf16> -> tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, FlatSymbolRefAttr:$weight);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `->` type($output)
  }];
}

def Graph_LinearBF16Op : Graph_WeightUserOp<"linear_bf16"> {
  let summary = "y = x @ W^T with a bf16 W in (out, in) layout";
  let description = [{
    The small bf16 linears (KDA `beta_proj`, the MoE router when used alone):
    `W` a `graph.weight` `[out, in]`, fp32 accumulation, one rounding to bf16.

    ```mlir
    %b = graph.linear_bf16 %n, @"blocks.0.attn.beta_proj.weight" : tensor<2304xbf16> -> tensor<32xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, FlatSymbolRefAttr:$weight);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `->` type($output)
  }];
}

def Graph_AddOp : Graph_ComputeOp<"add",
    [AllTypesMatch<["lhs", "rhs", "output"]>]> {
  let summary = "Residual add, rounded to bf16";
  let description = [{
    `y = bf16(f32(a) + f32(b))`.

    ```mlir
    %h = graph.add %x, %attn : tensor<2304xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$lhs, Graph_BF16Vector:$rhs);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($output)";
}

def Graph_SliceOp : Graph_ComputeOp<"slice"> {
  let summary = "A contiguous slice along the last dimension";
  let description = [{
    Takes `result.shape[-1]` elements of the last dimension starting at
    `offset`; other dimensions are kept. Splits MLA's `kv` into `c` and `kr`.

    ```mlir
    %c  = graph.slice %kv[0] : tensor<576xbf16> -> tensor<512xbf16>
    %kr = graph.slice %kv[512] : tensor<576xbf16> -> tensor<64xbf16>
    ```
  }];
  let arguments = (ins Graph_AnyStaticTensor:$input, I64Attr:$offset);
  let results = (outs Graph_AnyStaticTensor:$output);
  let assemblyFormat = [{
    $input `[` $offset `]` attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Graph_ReshapeOp : Graph_ComputeOp<"reshape"> {
  let summary = "A row-major reshape (a view; no data movement)";
  let description = [{
    ```mlir
    %q2 = graph.reshape %q : tensor<6144xbf16> -> tensor<32x192xbf16>
    ```
  }];
  let arguments = (ins Graph_AnyStaticTensor:$input);
  let results = (outs Graph_AnyStaticTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def Graph_KdaShortConvOp : Graph_WeightUserOp<"kda_short_conv",
    [AllTypesMatch<["input", "output"]>,
     AllTypesMatch<["window", "new_window"]>]> {
  let summary = "Causal depthwise short convolution with SiLU (one new row)";
  let description = [{
    `window` holds the `short_conv - 1` previous pre-convolution rows (oldest
    first); with `win = [window..., input]`,
    `out[c] = bf16(silu(sum_t f32(win[t][c]) * f32(w[conv_index][c][t])))`
    and `new_window = win[1:]`. `weight` is the `graph.weight`
    `[3, C, short_conv]`; `conv_index` picks q (0), k (1) or v (2).

    ```mlir
    %qc, %cq1 = graph.kda_short_conv %q, %cq, @"blocks.0.attn.conv_w"[0] : tensor<4096xbf16>, tensor<3x4096xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, Graph_BF16Matrix:$window,
                       FlatSymbolRefAttr:$weight, I64Attr:$conv_index);
  let results = (outs Graph_BF16Vector:$output, Graph_BF16Matrix:$new_window);
  let assemblyFormat = [{
    $input `,` $window `,` $weight `[` $conv_index `]` attr-dict `:`
    type($input) `,` type($window)
  }];
  let hasVerifier = 1;
}

def Graph_KdaGatedDeltaOp : Graph_WeightUserOp<"kda_gated_delta",
    [AllTypesMatch<["q", "k", "v", "g_raw", "output"]>,
     AllTypesMatch<["state", "new_state"]>]> {
  let summary = "Kimi Delta Attention: gated delta rule for one token";
  let description = [{
    Inputs are the convolved `q`, `k`, `v`, the raw gate projection `g_raw`
    (all bf16 `[C]`, viewed `[heads, head_dim]`), the raw `beta_logits`
    (bf16 `[heads]`) and the state `S` (f32 `[heads, head_dim, head_dim]`).
    The op applies `q *= head_dim^-0.5`, `g = -softplus(g_raw)`,
    `beta = sigmoid(beta_logits)` itself, then per head
    `S *= exp(g)` (rows), `S += beta k (v - S^T k)^T`, `o = S^T q`;
    `output` is `bf16(o)` `[C]`, `new_state` the updated `S`.

    The released Kimi-Linear form: with `qk_l2_eps`, q and k are first
    divided per head by `sqrt(sum x^2 + qk_l2_eps)` (q then scaled as above);
    with `a_log` (f32 `[heads]`) and `dt_bias` (f32 `[C]`), both
    `graph.weight`s, the decay is `g = -exp(a_log[h]) * softplus(g_raw +
    dt_bias)`.

    ```mlir
    %o, %S1 = graph.kda_gated_delta %qc, %kc, %vc, %g, %b, %S heads(32) head_dim(128) : tensor<4096xbf16>, tensor<32xbf16>, tensor<32x128x128xf32>
    %o, %S1 = graph.kda_gated_delta %qc, %kc, %vc, %f, %b, %S heads(32) head_dim(128) {a_log = @"blocks.0.attn.A_log", dt_bias = @"blocks.0.attn.dt_bias", qk_l2_eps = 1.0e-06 : f64} : tensor<4096xbf16>, tensor<32xbf16>, tensor<32x128x128xf32>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$q, Graph_BF16Vector:$k,
                       Graph_BF16Vector:$v, Graph_BF16Vector:$g_raw,
                       Graph_BF16Vector:$beta_logits, Graph_F32Tensor3D:$state,
                       I64Attr:$heads, I64Attr:$head_dim, OptionalAttr<F64Attr>:$qk_l2_eps,
                       OptionalAttr<FlatSymbolRefAttr>:$a_log,
                       OptionalAttr<FlatSymbolRefAttr>:$dt_bias);
  let results = (outs Graph_BF16Vector:$output, Graph_F32Tensor3D:$new_state);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $g_raw `,` $beta_logits `,` $state
    `heads` `(` $heads `)` `head_dim` `(` $head_dim `)` attr-dict `:`
    type($q) `,` type($beta_logits) `,` type($state)
  }];
  let hasVerifier = 1;
}

def Graph_KdaGatedNormOp : Graph_WeightUserOp<"kda_gated_norm",
    [AllTypesMatch<["input", "gate", "output"]>]> {
  let summary = "The released KDA's sigmoid-gated RMSNorm of each head's output";
  let description = [{
    Per head `h` of `input` (bf16 `[heads * head_dim]`, the gated delta
    rule's output), all fp32 until one rounding:
    `z[h,i] = bf16(x[h,i] * rsqrt(mean_i x[h,:]^2 + eps) * w[i] * sigmoid(gate[h,i]))`;
    `weight` is a bf16 `graph.weight` `[head_dim]` shared by the heads,
    `gate` the output gate's projection (bf16, same shape as `input`).

    ```mlir
    %z = graph.kda_gated_norm %kda_o, %gl, @"blocks.0.attn.o_norm" heads(32) head_dim(128) eps(1.0e-05) : tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, Graph_BF16Vector:$gate,
                       FlatSymbolRefAttr:$weight, I64Attr:$heads, I64Attr:$head_dim,
                       F64Attr:$eps);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $input `,` $gate `,` $weight `heads` `(` $heads `)` `head_dim` `(` $head_dim `)`
    `eps` `(` custom<Real>($eps) `)` attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Graph_EmbeddingOp : Graph_WeightUserOp<"embedding"> {
  let summary = "The row of a token id in an embedding table (the whole model's input)";
  let description = [{
    `output = weight[token]`: `weight` is a bf16 `graph.weight` `[vocab,
    d]`, `token` a token id in `[0, vocab)` (the runtime refuses others
    before the step).

    ```mlir
    %x = graph.embedding %token, @embed.weight : tensor<2304xbf16>
    ```
  }];
  let arguments = (ins I32:$token, FlatSymbolRefAttr:$weight);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = "$token `,` $weight attr-dict `:` type($output)";
}

def Graph_ArgmaxOp : Graph_ComputeOp<"argmax"> {
  let summary = "The index of the largest value (the whole model's next token)";
  let description = [{
    The first index of the largest of `input`'s values (bf16 logits), as
    i32: greedy decoding's next token.

    ```mlir
    %next = graph.argmax %logits : tensor<163840xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input);
  let results = (outs I32:$index);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_RopeOp : Graph_ComputeOp<"rope", [AllTypesMatch<["input", "output"]>]> {
  let summary = "Rotary embedding at a position";
  let description = [{
    Rotates elements `[offset, offset + rope_dim)` of the last dimension of
    every row of `input` (a vector, or `[heads, head_dim]`), in interleaved
    pairs (the Kimi unit's; element `2i` with `2i + 1`) or, with
    `rotate_half`, element `i` with `i + rope_dim/2` (the dense GQA
    family's): `inv[i] = theta^(-2i/rope_dim)`, `a = position * inv[i]`,
    `(x0, x1) -> (x0 cos a - x1 sin a, x1 cos a + x0 sin a)` in f32, rounded
    to bf16. Other elements pass through.

    ```mlir
    // the rope part of every MLA query head
    %qr = graph.rope %q2, %pos theta(10000.0) offset(128) rope_dim(64) : tensor<32x192xbf16>
    // the shared rotary key
    %kr1 = graph.rope %kr, %pos theta(10000.0) offset(0) rope_dim(64) : tensor<64xbf16>
    // every GQA key head, rotate-half pairs
    %kr2 = graph.rope %kn, %pos theta(1000000.0) offset(0) rope_dim(128) rotate_half : tensor<8x128xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16VectorOrMatrix:$input, I32:$position,
                       F64Attr:$theta, I64Attr:$offset, I64Attr:$rope_dim,
                       UnitAttr:$rotate_half);
  let results = (outs Graph_BF16VectorOrMatrix:$output);
  let assemblyFormat = [{
    $input `,` $position `theta` `(` custom<Real>($theta) `)` `offset` `(` $offset `)`
    `rope_dim` `(` $rope_dim `)` (`rotate_half` $rotate_half^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Graph_MlaCacheAppendOp : Graph_ComputeOp<"mla_cache_append",
    [AllTypesMatch<["cache", "output"]>]> {
  let summary = "Appends one row to an MLA cache";
  let description = [{
    The result holds the `L` rows of `cache` followed by `row`.

    ```mlir
    %ckv1 = graph.mla_cache_append %ckv, %c : tensor<?x512xbf16>, tensor<512xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Cache:$cache, Graph_BF16Vector:$row);
  let results = (outs Graph_BF16Cache:$output);
  let assemblyFormat = [{
    $cache `,` $row attr-dict `:` type($cache) `,` type($row)
  }];
  let hasVerifier = 1;
}

def Graph_HeadRMSNormOp : Graph_WeightUserOp<"head_rmsnorm",
    [AllTypesMatch<["input", "output"]>]> {
  let summary = "RMSNorm of every head (row) of a [heads, head_dim] tensor";
  let description = [{
    Row by row, `graph.rmsnorm`'s arithmetic over `head_dim` with one bf16
    weight `[head_dim]` shared by all heads (the dense GQA family's q / k
    norms).

    ```mlir
    %qn = graph.head_rmsnorm %q2, @"blocks.0.attn.q_norm" eps(1.0e-06) : tensor<32x128xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Matrix:$input, FlatSymbolRefAttr:$weight, F64Attr:$eps);
  let results = (outs Graph_BF16Matrix:$output);
  let assemblyFormat = [{
    $input `,` $weight `eps` `(` custom<Real>($eps) `)` attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Graph_KvCacheAppendOp : Graph_ComputeOp<"kv_cache_append",
    [AllTypesMatch<["cache", "output"]>]> {
  let summary = "Appends one row of heads to a GQA key or value cache";
  let description = [{
    The result holds the `L` rows `[kv_heads, head_dim]` of `cache` followed
    by `row`.

    ```mlir
    %kc1 = graph.kv_cache_append %kc, %kr : tensor<?x8x128xbf16>, tensor<8x128xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16HeadCache:$cache, Graph_BF16Matrix:$row);
  let results = (outs Graph_BF16HeadCache:$output);
  let assemblyFormat = [{
    $cache `,` $row attr-dict `:` type($cache) `,` type($row)
  }];
  let hasVerifier = 1;
}

def Graph_GqaAttentionOp : Graph_ComputeOp<"gqa_attention",
    [AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "Grouped-query attention over a key and a value cache";
  let description = [{
    `q` bf16 `[heads, head_dim]` (normalized and rotated), the caches
    `[L+1, kv_heads, head_dim]` (new row included); query head `h` reads kv
    head `h / (heads / kv_heads)`: scores `q . k / sqrt(head_dim)` in fp32,
    a softmax over all rows, `o[h] = sum_l p[l] v[l]`, rounded to bf16. The
    result is `o` flattened, `[heads * head_dim]`.

    ```mlir
    %o = graph.gqa_attention %qr, %kc1, %vc1 : tensor<32x128xbf16>, tensor<?x8x128xbf16> -> tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Matrix:$q, Graph_BF16HeadCache:$k_cache,
                       Graph_BF16HeadCache:$v_cache);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $q `,` $k_cache `,` $v_cache attr-dict `:` type($q) `,` type($k_cache) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Graph_MlaAttentionOp : Graph_WeightUserOp<"mla_attention"> {
  let summary = "Multi-head latent attention over the whole cache (materialized)";
  let description = [{
    `q` bf16 `[heads, qk_nope + qk_rope]` (rope part already rotated, or
    used as projected where the layer has no rotation), the
    caches `c_kv` `[L+1, kv_lora]` and `k_rope` `[L+1, qk_rope]` (new row
    included) and `kv_b`, a `graph.quantized_weight`
    `[kv_lora, heads * (qk_nope + v_head)]`. Semantics as the spec's
    materialized form: `kvb = bf16(c_kv @ W_kv_b)`, scores scaled by
    `1/sqrt(qk_nope + qk_rope)`, softmax over all rows, `o = p @ val`; the
    result is `bf16(o)` `[heads * v_head]`. A later pass absorbs `kv_b`.

    ```mlir
    %o = graph.mla_attention %qr, %ckv1, %kr1, @"blocks.3.attn.kv_b" heads(32) qk_nope(128) qk_rope(64) v_head(128) : tensor<32x192xbf16>, tensor<?x512xbf16>, tensor<?x64xbf16> -> tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Graph_BF16Matrix:$q, Graph_BF16Cache:$c_kv,
                       Graph_BF16Cache:$k_rope, FlatSymbolRefAttr:$kv_b,
                       I64Attr:$heads, I64Attr:$qk_nope, I64Attr:$qk_rope,
                       I64Attr:$v_head);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $q `,` $c_kv `,` $k_rope `,` $kv_b `heads` `(` $heads `)`
    `qk_nope` `(` $qk_nope `)` `qk_rope` `(` $qk_rope `)`
    `v_head` `(` $v_head `)` attr-dict `:`
    type($q) `,` type($c_kv) `,` type($k_rope) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Graph_MoeRouterOp : Graph_WeightUserOp<"moe_router"> {
  let summary = "MoE router: bf16 logits, softmax (or sigmoid + bias), top-k, renormalize";
  let description = [{
    `logits = bf16(u @ router^T)` (`router` a bf16 `graph.weight` `[E, d]`),
    `p = softmax(f32(logits))`, the `top_k` largest (`weights` f32, `indices`
    i32, in descending order), `weights = weights / (sum + 1e-9) * scaling`.
    With `bias` (a bf16 `graph.weight` `[E]`: the released model's
    correction bias) the logits stay fp32 (`u @ router^T`, not rounded),
    the scores are `s = sigmoid(logits)`, the
    `top_k` largest of `s + bias` are chosen (descending), and `weights`
    are their unbiased `s / (sum + 1e-20) * scaling`.

    ```mlir
    %w, %idx = graph.moe_router %m, @"blocks.0.moe.router.weight" top_k(8) scaling(2.446) : tensor<2304xbf16> -> tensor<8xf32>, tensor<8xi32>
    %w2, %idx2 = graph.moe_router %m, @"blocks.1.moe.router.weight" bias(@"blocks.1.moe.router.bias") top_k(8) scaling(2.446) : tensor<2304xbf16> -> tensor<8xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, FlatSymbolRefAttr:$weight,
                       OptionalAttr<FlatSymbolRefAttr>:$bias,
                       I64Attr:$top_k, F64Attr:$scaling);
  let results = (outs Graph_F32Vector:$weights, Graph_I32Vector:$indices);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `)`)? `top_k` `(` $top_k `)` `scaling` `(` custom<Real>($scaling) `)`
    attr-dict `:` type($input) `->` type($weights) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def Graph_MoeExpertsOp : Graph_WeightUserOp<"moe_experts"> {
  let summary = "The routed experts' weighted sum (f32, not rounded)";
  let description = [{
    For each `j`, expert `e = indices[j]`:
    `y_e = (silu(f32(u) @ gate_e) * (f32(u) @ up_e)) @ down_e`, all f32;
    the result is `sum_j weights[j] * y_e` (f32 `[d]`). `gate`/`up` are
    `graph.quantized_weight` `[E, d, m]`, `down` `[E, m, d]`.

    `bf16_steps` (the released model's FFN rounding): each step rounded to
    bf16 as a bf16 model computes it, `g = bf16(u @ gate_e)`,
    `v = bf16(u @ up_e)`, `h = bf16(bf16(silu(g)) * v)`,
    `y_e = bf16(h @ down_e)`; the weighted sum stays f32.

    ```mlir
    %r = graph.moe_experts %m, %w, %idx gate(@"blocks.0.moe.gate") up(@"blocks.0.moe.up") down(@"blocks.0.moe.down") : tensor<2304xbf16>, tensor<8xf32>, tensor<8xi32> -> tensor<2304xf32>
    %r2 = graph.moe_experts %m, %w, %idx gate(@"blocks.1.moe.gate") up(@"blocks.1.moe.up") down(@"blocks.1.moe.down") bf16_steps : tensor<2304xbf16>, tensor<8xf32>, tensor<8xi32> -> tensor<2304xf32>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, Graph_F32Vector:$weights,
                       Graph_I32Vector:$indices, FlatSymbolRefAttr:$gate,
                       FlatSymbolRefAttr:$up, FlatSymbolRefAttr:$down,
                       UnitAttr:$bf16_steps);
  let results = (outs Graph_F32Vector:$output);
  let assemblyFormat = [{
    $input `,` $weights `,` $indices `gate` `(` $gate `)` `up` `(` $up `)`
    `down` `(` $down `)` (`bf16_steps` $bf16_steps^)? attr-dict `:` type($input) `,`
    type($weights) `,` type($indices) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Graph_SharedExpertsOp : Graph_WeightUserOp<"shared_experts"> {
  let summary = "The always-on shared experts' sum (f32, not rounded)";
  let description = [{
    `sum_s (silu(f32(u) @ gate_s) * (f32(u) @ up_s)) @ down_s` over the
    `n_shared` experts stacked in `gate`/`up` (`[S, d, m]`) and `down`
    (`[S, m, d]`), or of one expert given as plain linears (`[d, m]`,
    `[m, d]`: a dense SwiGLU FFN).

    `bf16_steps` (the released model's FFN rounding): each expert's
    intermediate in bf16 steps, `h = bf16(bf16(silu(bf16(u @ gate_s))) *
    bf16(u @ up_s))`; the sum of the down products stays f32 (experts side
    by side are one FFN of their total width, whose output
    `graph.moe_combine` rounds once).

    ```mlir
    %s = graph.shared_experts %m gate(@"blocks.0.moe.s_gate") up(@"blocks.0.moe.s_up") down(@"blocks.0.moe.s_down") : tensor<2304xbf16> -> tensor<2304xf32>
    ```
  }];
  let arguments = (ins Graph_BF16Vector:$input, FlatSymbolRefAttr:$gate,
                       FlatSymbolRefAttr:$up, FlatSymbolRefAttr:$down,
                       UnitAttr:$bf16_steps);
  let results = (outs Graph_F32Vector:$output);
  let assemblyFormat = [{
    $input `gate` `(` $gate `)` `up` `(` $up `)` `down` `(` $down `)`
    (`bf16_steps` $bf16_steps^)? attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Graph_MoeCombineOp : Graph_ComputeOp<"moe_combine"> {
  let summary = "Sums routed and shared expert outputs, rounded to bf16 (once, or each part first)";
  let description = [{
    `bf16(routed + shared)`; `shared` is absent when the block has no shared
    experts. `round_parts` (the released model's FFN rounding): each part
    rounded first, `bf16(bf16(routed) + bf16(shared))`.

    ```mlir
    %moe = graph.moe_combine %r, %s : tensor<2304xf32>, tensor<2304xf32> -> tensor<2304xbf16>
    %moe = graph.moe_combine %r : tensor<2304xf32> -> tensor<2304xbf16>
    %moe2 = graph.moe_combine %r2, %s2 round_parts : tensor<2304xf32>, tensor<2304xf32> -> tensor<2304xbf16>
    ```
  }];
  let arguments = (ins Graph_F32Vector:$routed,
                       Optional<Graph_F32Vector>:$shared, UnitAttr:$round_parts);
  let results = (outs Graph_BF16Vector:$output);
  let assemblyFormat = [{
    $routed (`,` $shared^)? (`round_parts` $round_parts^)? attr-dict `:` type($routed)
    (`,` type($shared)^)? `->` type($output)
  }];
  let hasVerifier = 1;
}

#endif // MK_GRAPH_OPS_TD
