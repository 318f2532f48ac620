//===- GraphOps.cpp - Ops of the graph dialect ----------------------------===//
//
// Verifiers. Local shape rules live in verify(); rules that need a weight's
// declaration live in verifySymbolUses(), which the enclosing module's symbol
// table verifier calls with a shared lookup cache.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mk::graph;

//===----------------------------------------------------------------------===//
// custom<Real>: an f64 attribute printed in its shortest round-tripping form
// (`1.0e-06`, `10000.0`, `2.446`) rather than `9.9999999999999995E-7`.
//===----------------------------------------------------------------------===//

static ParseResult parseReal(OpAsmParser &parser, FloatAttr &attr) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  attr = parser.getBuilder().getF64FloatAttr(value);
  return success();
}

static void printReal(OpAsmPrinter &p, Operation *, FloatAttr attr) {
  double value = attr.getValueAsDouble();
  std::string text;
  if (value == static_cast<double>(static_cast<int64_t>(value)) &&
      std::abs(value) < 1e15) {
    p << llvm::formatv("{0:F1}", value);
    return;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    text = buf;
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  // MLIR float literals need a '.' before any exponent.
  if (text.find_first_of(".ein") == std::string::npos)
    text += ".0";
  else if (text.find('.') == std::string::npos && text.find('e') != std::string::npos)
    text.insert(text.find('e'), ".0");
  p << text;
}

#define GET_OP_CLASSES
#include "mk/Dialect/Graph/GraphOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

/// Resolves `ref` from `user` to an op of kind OpT, or reports (on `user`)
/// that it is undefined or of the wrong kind. `role` names the operand in
/// errors ("weight", "gate", ...).
template <typename OpT>
static FailureOr<OpT> lookupSymbol(Operation *user, SymbolTableCollection &st,
                                   FlatSymbolRefAttr ref, StringRef role) {
  Operation *sym = st.lookupNearestSymbolFrom(user, ref.getAttr());
  if (!sym)
    return user->emitOpError()
           << role << " " << ref << " does not name a symbol of the module";
  auto op = dyn_cast<OpT>(sym);
  if (!op)
    return user->emitOpError()
           << role << " " << ref << " must be a '" << OpT::getOperationName()
           << "', but it is a '" << sym->getName() << "'";
  return op;
}

/// lookupSymbol of a graph.weight whose elements are bf16 (or, with `f32`,
/// f32): what the op's lowering reads it as.
static FailureOr<WeightOp> lookupWeight(Operation *user, SymbolTableCollection &st,
                                        FlatSymbolRefAttr ref, StringRef role,
                                        bool f32 = false) {
  auto w = lookupSymbol<WeightOp>(user, st, ref, role);
  if (failed(w))
    return failure();
  Type elt = w->getTensorType().getElementType();
  if (f32 ? !elt.isF32() : !elt.isBF16())
    return user->emitOpError() << role << " " << ref << " must have "
                               << (f32 ? "f32" : "bf16") << " elements, got "
                               << w->getTensorType();
  return w;
}

/// Checks that `shape` equals `expected` (dims < 0 in `expected` match any).
static LogicalResult expectShape(Operation *user, StringRef role,
                                 FlatSymbolRefAttr ref, RankedTensorType type,
                                 ArrayRef<int64_t> expected) {
  bool ok = type.getRank() == static_cast<int64_t>(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i)
    ok = expected[i] < 0 || type.getDimSize(i) == expected[i];
  if (ok)
    return success();
  InFlightDiagnostic diag = user->emitOpError()
                            << role << " " << ref << " has type " << type
                            << ", expected shape [";
  llvm::interleave(
      expected, [&](int64_t d) { d < 0 ? diag << "?" : diag << d; },
      [&] { diag << ", "; });
  return diag << "]";
}

/// The last component of a weight's name, to name results after it:
/// "blocks.0.attn.q_proj" -> "q_proj", "blocks.0.attn.beta_proj.weight" ->
/// "beta_proj".
static StringRef leafName(FlatSymbolRefAttr ref) {
  StringRef name = ref.getValue();
  StringRef leaf = name.substr(name.rfind('.') + 1); // npos + 1 == 0
  if (leaf == "weight" && leaf.size() < name.size()) {
    name = name.drop_back(leaf.size() + 1);
    leaf = name.substr(name.rfind('.') + 1);
  }
  return leaf;
}

//===----------------------------------------------------------------------===//
// Result names
//===----------------------------------------------------------------------===//

void RMSNormOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), leafName(getWeightAttr()));
}
void LinearW4A16Op::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), leafName(getWeightAttr()));
}
void LinearBF16Op::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), leafName(getWeightAttr()));
}
void AddOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "h");
}
void SliceOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "slice");
}
void ReshapeOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "view");
}
void KdaShortConvOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  static const char *const names[][2] = {
      {"q_conv", "cq"}, {"k_conv", "ck"}, {"v_conv", "cv"}};
  int64_t i = std::clamp<int64_t>(getConvIndex(), 0, 2);
  setName(getOutput(), names[i][0]);
  setName(getNewWindow(), names[i][1]);
}
void KdaGatedDeltaOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "kda_o");
  setName(getNewState(), "S");
}
void EmbeddingOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "embedded");
}
void ArgmaxOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getIndex(), "next");
}
void KdaGatedNormOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "kda_z");
}
void RopeOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "rot");
}
void MlaCacheAppendOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "cache");
}
void HeadRMSNormOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "headnorm");
}
void KvCacheAppendOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "cache");
}
void GqaAttentionOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "attn");
}
void MlaAttentionOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "mla_o");
}
void MoeRouterOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getWeights(), "topk_w");
  setName(getIndices(), "topk_idx");
}
void MoeExpertsOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "routed");
}
void SharedExpertsOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "shared");
}
void MoeCombineOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getOutput(), "moe");
}

//===----------------------------------------------------------------------===//
// Symbols
//===----------------------------------------------------------------------===//

/// A symbol's optional layer is a layer index.
static LogicalResult verifyLayer(Operation *op, std::optional<uint64_t> layer) {
  if (layer && int64_t(*layer) < 0)
    return op->emitOpError() << "layer must be >= 0, got " << int64_t(*layer);
  return success();
}

LogicalResult WeightOp::verify() {
  if (failed(verifyLayer(*this, getLayer())))
    return failure();
  RankedTensorType t = getTensorType();
  if (!t.getElementType().isBF16() && !t.getElementType().isF32())
    return emitOpError() << "weight must have bf16 or f32 elements, got " << t;
  if (!t.hasStaticShape())
    return emitOpError() << "weight must have a static shape, got " << t;
  return success();
}

LogicalResult QuantizedWeightOp::verify() {
  if (failed(verifyLayer(*this, getLayer())))
    return failure();
  RankedTensorType t = getTensorType();
  if (!t.getElementType().isInteger(4))
    return emitOpError() << "quantized weight must have i4 elements, got "
                         << t;
  if (t.getRank() != 2 && t.getRank() != 3)
    return emitOpError() << "quantized weight must be [in, out] or "
                            "[experts, in, out], got "
                         << t;
  if (!t.hasStaticShape())
    return emitOpError() << "quantized weight must have a static shape, got "
                         << t;
  int64_t group = getGroup();
  if (group <= 0 || group % 2)
    return emitOpError() << "group size must be positive and even, got "
                         << group;
  if (getInDim() % group)
    return emitOpError() << "input dim " << getInDim()
                         << " is not divisible by the group size " << group;
  return success();
}

LogicalResult StateOp::verify() {
  if (failed(verifyLayer(*this, getLayer())))
    return failure();
  RankedTensorType t = getTensorType();
  Type elt = t.getElementType();
  if (!elt.isBF16() && !elt.isF32())
    return emitOpError() << "state must have bf16 or f32 elements, got " << t;
  for (int64_t i = 1; i < t.getRank(); ++i)
    if (t.isDynamicDim(i))
      return emitOpError()
             << "only the leading (row) dimension of a state may be dynamic, "
                "got "
             << t;
  return success();
}

//===----------------------------------------------------------------------===//
// Norms, linears, elementwise
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive";
  return success();
}

LogicalResult
RMSNormOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(),
                                  "weight");
  if (failed(w))
    return failure();
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                     {dim(getInput(), 0)});
}

LogicalResult
LinearW4A16Op::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupSymbol<QuantizedWeightOp>(*this, symbolTable,
                                           getWeightAttr(), "weight");
  if (failed(w))
    return failure();
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                     {dim(getInput(), 0), dim(getOutput(), 0)});
}

LogicalResult
LinearBF16Op::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(),
                                  "weight");
  if (failed(w))
    return failure();
  // (out, in) layout, as PyTorch's nn.Linear stores it.
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                     {dim(getOutput(), 0), dim(getInput(), 0)});
}

LogicalResult SliceOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "element types differ: " << in << " vs " << out;
  if (in.getRank() != out.getRank())
    return emitOpError() << "ranks differ: " << in << " vs " << out;
  int64_t last = in.getRank() - 1;
  for (int64_t i = 0; i < last; ++i)
    if (in.getDimSize(i) != out.getDimSize(i))
      return emitOpError() << "only the last dimension may be sliced: " << in
                           << " vs " << out;
  int64_t offset = getOffset();
  if (offset < 0 || offset + out.getDimSize(last) > in.getDimSize(last))
    return emitOpError() << "slice [" << offset << ", "
                         << offset + out.getDimSize(last)
                         << ") is out of bounds of the last dimension ("
                         << in.getDimSize(last) << ")";
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "element types differ: " << in << " vs " << out;
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "element counts differ: " << in << " has "
                         << in.getNumElements() << ", " << out << " has "
                         << out.getNumElements();
  return success();
}

//===----------------------------------------------------------------------===//
// KDA
//===----------------------------------------------------------------------===//

LogicalResult KdaShortConvOp::verify() {
  // (Signed: I64Attr's getter is unsigned.)
  if (const auto index = static_cast<int64_t>(getConvIndex()); index < 0 || index > 2)
    return emitOpError() << "conv_index must be 0 (q), 1 (k) or 2 (v), got " << index;
  int64_t c = dim(getInput(), 0);
  if (dim(getWindow(), 1) != c)
    return emitOpError() << "window " << getWindow().getType()
                         << " must have " << c << " channels, like the input";
  if (dim(getWindow(), 0) < 1)
    return emitOpError() << "window must keep at least one row";
  return success();
}

LogicalResult
KdaShortConvOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(),
                                  "weight");
  if (failed(w))
    return failure();
  // [q|k|v, C, taps], taps = window rows + the new row.
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                     {3, dim(getInput(), 0), dim(getWindow(), 0) + 1});
}

LogicalResult KdaGatedDeltaOp::verify() {
  int64_t heads = getHeads(), headDim = getHeadDim();
  if (heads <= 0 || headDim <= 0)
    return emitOpError() << "heads and head_dim must be positive";
  int64_t c = dim(getQ(), 0);
  if (heads * headDim != c)
    return emitOpError() << "q/k/v/g have " << c
                         << " channels, but heads * head_dim = "
                         << heads * headDim;
  if (dim(getBetaLogits(), 0) != heads)
    return emitOpError() << "beta_logits " << getBetaLogits().getType()
                         << " must have one entry per head (" << heads << ")";
  auto s = cast<RankedTensorType>(getState().getType());
  if (s.getDimSize(0) != heads || s.getDimSize(1) != headDim ||
      s.getDimSize(2) != headDim)
    return emitOpError() << "state " << s << " must be [" << heads << ", "
                         << headDim << ", " << headDim << "]";
  if (getQkL2Eps() && !(getQkL2Eps()->convertToDouble() > 0))
    return emitOpError() << "qk_l2_eps must be positive";
  if (getALog().has_value() != getDtBias().has_value())
    return emitOpError() << "takes a_log and dt_bias together (the low-rank decay), got only "
                         << (getALog() ? "a_log" : "dt_bias");
  return success();
}

LogicalResult
KdaGatedDeltaOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  // The low-rank decay's fp32 parameters: a rate per head, a bias per
  // channel.
  auto f32Param = [&](FlatSymbolRefAttr sym, StringRef role, int64_t n) -> LogicalResult {
    auto w = lookupWeight(*this, symbolTable, sym, role, /*f32=*/true);
    if (failed(w))
      return failure();
    return expectShape(*this, role, sym, w->getTensorType(), {n});
  };
  if (getALogAttr() && failed(f32Param(getALogAttr(), "a_log", getHeads())))
    return failure();
  if (getDtBiasAttr() && failed(f32Param(getDtBiasAttr(), "dt_bias", dim(getQ(), 0))))
    return failure();
  return success();
}

LogicalResult EmbeddingOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(), "weight");
  if (failed(w))
    return failure();
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                     {-1, dim(getOutput(), 0)});
}

LogicalResult KdaGatedNormOp::verify() {
  int64_t heads = getHeads(), headDim = getHeadDim();
  if (heads <= 0 || headDim <= 0)
    return emitOpError() << "heads and head_dim must be positive";
  if (heads * headDim != dim(getInput(), 0))
    return emitOpError() << "input has " << dim(getInput(), 0)
                         << " channels, but heads * head_dim = " << heads * headDim;
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive";
  return success();
}

LogicalResult KdaGatedNormOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(), "weight");
  if (failed(w))
    return failure();
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(), {int64_t(getHeadDim())});
}

//===----------------------------------------------------------------------===//
// MLA
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  int64_t ropeDim = getRopeDim(), offset = getOffset();
  if (ropeDim <= 0 || ropeDim % 2)
    return emitOpError() << "rope_dim must be positive and even, got "
                         << ropeDim;
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError() << "theta must be positive";
  auto t = cast<RankedTensorType>(getInput().getType());
  int64_t last = t.getDimSize(t.getRank() - 1);
  if (offset < 0 || offset + ropeDim > last)
    return emitOpError() << "rotated range [" << offset << ", "
                         << offset + ropeDim
                         << ") exceeds the last dimension (" << last << ")";
  return success();
}

LogicalResult MlaCacheAppendOp::verify() {
  auto cache = cast<RankedTensorType>(getCache().getType());
  if (!cache.isDynamicDim(0))
    return emitOpError() << "cache " << cache
                         << " must have a dynamic row dimension";
  if (cache.isDynamicDim(1) || cache.getDimSize(1) != dim(getRow(), 0))
    return emitOpError() << "row " << getRow().getType()
                         << " does not match the cache width of " << cache;
  return success();
}

LogicalResult MlaAttentionOp::verify() {
  int64_t heads = getHeads(), nope = getQkNope(), rope = getQkRope(),
          vHead = getVHead();
  if (heads <= 0 || nope <= 0 || rope <= 0 || vHead <= 0)
    return emitOpError() << "heads, qk_nope, qk_rope and v_head must be "
                            "positive";
  auto q = cast<RankedTensorType>(getQ().getType());
  if (q.getDimSize(0) != heads || q.getDimSize(1) != nope + rope)
    return emitOpError() << "q " << q << " must be [" << heads << ", "
                         << nope + rope << "] (heads, qk_nope + qk_rope)";
  auto ckv = cast<RankedTensorType>(getCKv().getType());
  auto kr = cast<RankedTensorType>(getKRope().getType());
  if (ckv.isDynamicDim(1))
    return emitOpError() << "c_kv " << ckv << " must have a static width";
  if (kr.isDynamicDim(1) || kr.getDimSize(1) != rope)
    return emitOpError() << "k_rope " << kr << " must have qk_rope (" << rope
                         << ") columns";
  if (!ckv.isDynamicDim(0) && !kr.isDynamicDim(0) &&
      ckv.getDimSize(0) != kr.getDimSize(0))
    return emitOpError() << "c_kv and k_rope have different row counts";
  if (dim(getOutput(), 0) != heads * vHead)
    return emitOpError() << "result " << getOutput().getType()
                         << " must have heads * v_head = " << heads * vHead
                         << " elements";
  return success();
}

LogicalResult
MlaAttentionOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupSymbol<QuantizedWeightOp>(*this, symbolTable, getKvBAttr(),
                                           "kv_b");
  if (failed(w))
    return failure();
  return expectShape(*this, "kv_b", getKvBAttr(), w->getTensorType(),
                     {dim(getCKv(), 1),
                      int64_t(getHeads()) * int64_t(getQkNope() + getVHead())});
}

//===----------------------------------------------------------------------===//
// GQA
//===----------------------------------------------------------------------===//

LogicalResult HeadRMSNormOp::verify() {
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive";
  return success();
}

LogicalResult HeadRMSNormOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(), "weight");
  if (failed(w))
    return failure();
  return expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                     {cast<RankedTensorType>(getInput().getType()).getDimSize(1)});
}

LogicalResult KvCacheAppendOp::verify() {
  auto cache = cast<RankedTensorType>(getCache().getType());
  auto row = cast<RankedTensorType>(getRow().getType());
  if (!cache.isDynamicDim(0))
    return emitOpError() << "cache " << cache << " must have a dynamic row dimension";
  if (cache.getShape().drop_front() != row.getShape())
    return emitOpError() << "row " << row << " does not match the cache's rows of " << cache;
  return success();
}

LogicalResult GqaAttentionOp::verify() {
  auto q = cast<RankedTensorType>(getQ().getType());
  auto k = cast<RankedTensorType>(getKCache().getType());
  const int64_t heads = q.getDimSize(0), hd = q.getDimSize(1), kvHeads = k.getDimSize(1);
  if (k.getDimSize(2) != hd)
    return emitOpError() << "q " << q << " and the caches " << k
                         << " must have one head_dim";
  if (kvHeads <= 0 || heads % kvHeads)
    return emitOpError() << "q's " << heads << " heads must be a multiple of the caches' "
                         << kvHeads << " kv heads";
  if (dim(getOutput(), 0) != heads * hd)
    return emitOpError() << "result " << getOutput().getType()
                         << " must have heads * head_dim = " << heads * hd << " elements";
  return success();
}

//===----------------------------------------------------------------------===//
// MoE
//===----------------------------------------------------------------------===//

LogicalResult MoeRouterOp::verify() {
  int64_t k = getTopK();
  if (k <= 0)
    return emitOpError() << "top_k must be positive, got " << k;
  if (dim(getWeights(), 0) != k || dim(getIndices(), 0) != k)
    return emitOpError() << "weights and indices must have top_k (" << k
                         << ") entries";
  if (!(getScaling().convertToDouble() > 0))
    return emitOpError() << "scaling must be positive";
  return success();
}

LogicalResult
MoeRouterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto w = lookupWeight(*this, symbolTable, getWeightAttr(),
                                  "weight");
  if (failed(w))
    return failure();
  if (failed(expectShape(*this, "weight", getWeightAttr(), w->getTensorType(),
                         {-1, dim(getInput(), 0)})))
    return failure();
  int64_t experts = w->getTensorType().getDimSize(0);
  if (getTopK() > experts)
    return emitOpError() << "top_k (" << getTopK() << ") exceeds the "
                         << experts << " experts of " << getWeightAttr();
  if (FlatSymbolRefAttr bias = getBiasAttr()) {
    auto bw = lookupWeight(*this, symbolTable, bias, "bias");
    if (failed(bw) ||
        failed(expectShape(*this, "bias", bias, bw->getTensorType(), {experts})))
      return failure();
  }
  return success();
}

/// Checks an expert stack: gate/up [E, d, m] and down [E, m, d], all with the
/// same E (returned through `experts`).
static LogicalResult verifyExpertStack(Operation *op,
                                       SymbolTableCollection &st,
                                       FlatSymbolRefAttr gate,
                                       FlatSymbolRefAttr up,
                                       FlatSymbolRefAttr down, int64_t d,
                                       int64_t &experts, bool allowPlain = false) {
  auto g = lookupSymbol<QuantizedWeightOp>(op, st, gate, "gate");
  if (failed(g))
    return failure();
  auto u = lookupSymbol<QuantizedWeightOp>(op, st, up, "up");
  if (failed(u))
    return failure();
  auto dn = lookupSymbol<QuantizedWeightOp>(op, st, down, "down");
  if (failed(dn))
    return failure();
  RankedTensorType gt = g->getTensorType();
  if (allowPlain && gt.getRank() == 2) {
    // One expert as plain [d, m] / [m, d] linears (a dense FFN).
    experts = 1;
    int64_t m = gt.getDimSize(1);
    if (failed(expectShape(op, "gate", gate, gt, {d, m})) ||
        failed(expectShape(op, "up", up, u->getTensorType(), {d, m})) ||
        failed(expectShape(op, "down", down, dn->getTensorType(), {m, d})))
      return failure();
    return success();
  }
  if (gt.getRank() != 3)
    return op->emitOpError() << "gate " << gate << " has type " << gt
                             << ", expected an expert stack [E, " << d << ", m]"
                             << (allowPlain ? " or a plain linear [" + std::to_string(d) + ", m]"
                                            : std::string());
  experts = gt.getDimSize(0);
  int64_t m = gt.getDimSize(2);
  if (failed(expectShape(op, "gate", gate, gt, {experts, d, m})) ||
      failed(expectShape(op, "up", up, u->getTensorType(), {experts, d, m})) ||
      failed(expectShape(op, "down", down, dn->getTensorType(),
                         {experts, m, d})))
    return failure();
  return success();
}

LogicalResult MoeExpertsOp::verify() {
  int64_t k = dim(getWeights(), 0);
  if (dim(getIndices(), 0) != k)
    return emitOpError() << "weights (" << k << ") and indices ("
                         << dim(getIndices(), 0)
                         << ") must have the same length";
  if (dim(getOutput(), 0) != dim(getInput(), 0))
    return emitOpError() << "result " << getOutput().getType()
                         << " must have the input's width "
                         << dim(getInput(), 0);
  return success();
}

LogicalResult
MoeExpertsOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t experts = 0;
  if (failed(verifyExpertStack(*this, symbolTable, getGateAttr(),
                               getUpAttr(), getDownAttr(),
                               dim(getInput(), 0), experts)))
    return failure();
  if (dim(getIndices(), 0) > experts)
    return emitOpError() << "routes to " << dim(getIndices(), 0)
                         << " experts out of only " << experts;
  return success();
}

LogicalResult SharedExpertsOp::verify() {
  if (dim(getOutput(), 0) != dim(getInput(), 0))
    return emitOpError() << "result " << getOutput().getType()
                         << " must have the input's width "
                         << dim(getInput(), 0);
  return success();
}

LogicalResult
SharedExpertsOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t experts = 0;
  return verifyExpertStack(*this, symbolTable, getGateAttr(), getUpAttr(),
                           getDownAttr(), dim(getInput(), 0), experts, /*allowPlain=*/true);
}

LogicalResult MoeCombineOp::verify() {
  int64_t d = dim(getRouted(), 0);
  if (getShared() && getShared().getType() != getRouted().getType())
    return emitOpError() << "shared " << getShared().getType()
                         << " must match routed " << getRouted().getType();
  if (getRoundParts() && !getShared())
    return emitOpError() << "rounds its parts apart (round_parts) but has only one";
  if (dim(getOutput(), 0) != d)
    return emitOpError() << "result " << getOutput().getType()
                         << " must have " << d << " elements";
  return success();
}
