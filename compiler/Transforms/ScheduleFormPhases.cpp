//===- ScheduleFormPhases.cpp - Graph step -> phases of tasks -------------===//
//
// Lowers `@decode_step` to one schedule.kernel. Each graph op becomes the
// tasks of its template (some ops are folded into their consumer: a short
// conv into the KDA task that recomputes it, RoPE and the cache appends into
// the MLA append task, the GQA heads' norms, RoPE and cache appends into the
// GQA append task, a residual add into the RMSNorm after it), each SSA
// value a buffer. Placement is planPhases (Planning.h) on the task DAG:
// every-block RMSNorms feed their consumers through shared memory without a
// barrier; any other cross-block edge needs one, and the ASAP placement uses
// the fewest barriers the longest chain allows. Counters come later
// (schedule-barriers-to-counters).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Planning.h"


#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <deque>
#include <map>

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEFORMPHASES
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;

namespace {

struct BufferSpec {
  std::string name, dtype, space;
  SmallVector<int64_t> shape;
};

struct TaskSpec {
  std::string name, op;
  std::optional<schedule::Partition> partition;
  schedule::TaskKind kind;
  SmallVector<std::string> reads, writes, accums;
  NamedAttrList args;
};

/// What a graph value is, in terms of buffers.
struct ValueInfo {
  enum Kind {
    Buffer,   // lives in `buffer` (element offset `offset`)
    Shared,   // the per-block normalized input in shared memory `buffer`
    Acc,      // fp32 accumulator `buffer`, rounded to bf16 by its reader
              // (with `aux`, a second one: bf16(bf16(buffer) + bf16(aux)))
    Residual, // graph.add(base, acc) not yet materialized
    Conv,     // kda_short_conv output: raw projection `buffer`, window `aux`
    Window,   // kda_short_conv new window (state `buffer`)
    Rope,     // rotated value of `buffer` (q: heads; kr: vector)
    HeadNorm, // graph.head_rmsnorm of `buffer` with weight `aux`
    HeadNormRope, // the same, rotated (rotate-half, every element of a head)
    Append,   // cache `aux` after appending `buffer`
    LatentNorm, // graph.rmsnorm of `buffer` with weight `aux` (eps `eps`),
                // cached by an MLA append task that normalizes it

    Router,   // router results: logits `buffer`
    Scalar,   // ctx_len
  } kind = Buffer;
  std::string buffer, aux;
  int64_t offset = 0;
  Value base, acc; // Residual
  double eps = 0;  // LatentNorm
  bool roundTwice = false; // LatentNorm
};

/// The dtype name of a graph tensor's element type ("bf16", "f32", "i32",
/// "u8"), or "" for one no kernel binds.
static StringRef dtypeOf(Type t) {
  if (t.isBF16())
    return "bf16";
  if (t.isF32())
    return "f32";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(8))
    return "u8";
  return "";
}

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp fn, StringRef mlaPartials)
      : module(module), symbols(module), fn(fn), b(module.getContext()),
        hidden(hiddenOf(fn)), mlaPartials(mlaPartials.str()) {}

  /// The hidden size: the step's input vector's, or (the whole model, a
  /// token id in) its embedding row's.
  static int64_t hiddenOf(func::FuncOp fn) {
    if (auto t = dyn_cast<RankedTensorType>(fn.getArgument(0).getType()))
      return t.getDimSize(0);
    for (Operation *u : fn.getArgument(0).getUsers())
      if (auto e = dyn_cast<graph::EmbeddingOp>(u))
        return e.getOutput().getType().getDimSize(0);
    return 0;
  }
  /// The whole model's embedding weight and logits buffer ("" for a block).
  std::string embedding, logits;

  LogicalResult run();

  std::vector<BufferSpec> buffers;
  std::vector<TaskSpec> tasks;

private:
  ModuleOp module;
  /// The module's symbols, hashed once (a lookup through the module scans
  /// it: quadratic in the layer count).
  SymbolTable symbols;
  func::FuncOp fn;
  OpBuilder b;
  /// The hidden size: the step's input.
  int64_t hidden;
  /// The MLA partial sums' element type (schedule-form-phases mla-partials).
  std::string mlaPartials;
  /// The quantized weight `name` (a graph.quantized_weight symbol): the
  /// lowering reads shapes and quantization groups from it.
  graph::QuantizedWeightOp quantized(Operation *user, StringRef name) {
    auto w = symbols.lookup<graph::QuantizedWeightOp>(name);
    if (!w)
      user->emitOpError("refers to '") << name << "', which is no graph.quantized_weight";
    return w;
  }
  llvm::DenseMap<Value, ValueInfo *> info;
  std::deque<ValueInfo> storage; // stable addresses for `info`
  void set(Value v, ValueInfo vi) {
    storage.push_back(vi);
    info[v] = &storage.back();
  }
  llvm::StringMap<int> bufferIndex;
  llvm::DenseMap<Operation *, std::string> combineAcc;
  /// A graph.moe_combine with round_parts: its shared experts' own sum.
  llvm::DenseMap<Operation *, std::string> combineSharedAcc;
  llvm::StringSet<> loweredGroups;
  llvm::DenseSet<Operation *> groupMembers; // of the groups lowered so far

  std::string buffer(const std::string &name, StringRef dtype,
                     ArrayRef<int64_t> shape, StringRef space = "workspace") {
    if (!bufferIndex.count(name)) {
      bufferIndex[name] = buffers.size();
      buffers.push_back({name, dtype.str(), space.str(),
                         SmallVector<int64_t>(shape.begin(), shape.end())});
    }
    return name;
  }
  TaskSpec &task(const std::string &name, schedule::TaskKind kind, Operation *op) {
    tasks.push_back({});
    TaskSpec &t = tasks.back();
    t.name = name;
    t.kind = kind;
    t.op = op ? op->getName().getStringRef().str() : "";
    return t;
  }
  std::string accumulator(const std::string &name, int64_t n) {
    std::string acc = buffer(name, "f32", {n});
    TaskSpec &z = task(name + ".zero", schedule::TaskKind::ZeroF32, nullptr);
    z.partition = schedule::Partition::Slices;
    z.writes.push_back(acc);
    setArg(z, "buffer", acc);
    setArg(z, "n", n);
    return acc;
  }
  void setArg(TaskSpec &t, StringRef k, const std::string &v) {
    t.args.set(k, b.getStringAttr(v));
  }
  void setArg(TaskSpec &t, StringRef k, int64_t v) {
    t.args.set(k, b.getI64IntegerAttr(v));
  }
  void setArg(TaskSpec &t, StringRef k, uint64_t v) {
    setArg(t, k, static_cast<int64_t>(v));
  }
  void setArg(TaskSpec &t, StringRef k, double v) {
    t.args.set(k, b.getF64FloatAttr(v));
  }
  void setArg(TaskSpec &t, StringRef k, ArrayRef<std::string> v) {
    SmallVector<Attribute> a;
    for (const std::string &s : v)
      a.push_back(b.getStringAttr(s));
    t.args.set(k, b.getArrayAttr(a));
  }
  void setArg(TaskSpec &t, StringRef k, ArrayRef<int64_t> v) {
    t.args.set(k, b.getI64ArrayAttr(v));
  }
  /// The debug-capture names the frontend gave `ops`' values (one per op,
  /// "" where none; graph.capture), as the task's `captures` if any is set.
  void setCaptures(TaskSpec &t, ArrayRef<Operation *> ops) {
    SmallVector<std::string> names;
    bool any = false;
    for (Operation *op : ops) {
      auto c = op->getAttrOfType<StringAttr>(graph::GraphDialect::getCaptureAttrName());
      names.push_back(c ? c.str() : "");
      any |= c && !c.empty();
    }
    if (any)
      setArg(t, "captures", names);
  }
  /// Layer prefix ("blocks.3") of a state-dict name.
  static std::string layerOf(StringRef sym) {
    auto parts = sym.split('.');
    auto rest = parts.second.split('.');
    return (parts.first + "." + rest.first).str();
  }
  const ValueInfo *get(Operation *op, Value v) {
    auto it = info.find(v);
    if (it == info.end()) {
      op->emitOpError("operand is not produced by a lowered op");
      return nullptr;
    }
    return it->second;
  }

  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerNorm(graph::RMSNormOp op);
  LogicalResult lowerLinearGroup(Operation *first);
  LogicalResult lowerKda(graph::KdaGatedDeltaOp op);
  LogicalResult lowerMla(graph::MlaAttentionOp op);
  LogicalResult lowerGqa(graph::GqaAttentionOp op);
  LogicalResult lowerExperts(Operation *op, bool routed);
  LogicalResult lowerReturn(func::ReturnOp op);
};

LogicalResult Lowering::run() {
  Block &entry = fn.getBody().front();
  for (BlockArgument arg : entry.getArguments()) {
    unsigned i = arg.getArgNumber();
    ValueInfo vi;
    if (i == 0 && isa<IntegerType>(arg.getType())) {
      vi.kind = ValueInfo::Scalar; // the whole model's token id
    } else if (i == 0) {
      vi.buffer = buffer("hidden_in", "bf16", {hidden}, "io");
    } else if (isa<IntegerType>(arg.getType())) {
      vi.kind = ValueInfo::Scalar;
    } else {
      auto sym = fn.getArgAttrOfType<FlatSymbolRefAttr>(i, "graph.state");
      if (!sym)
        return fn.emitOpError("argument ") << i << " is not tied to a state";
      auto t = dyn_cast<RankedTensorType>(arg.getType());
      if (!t)
        return fn.emitOpError("argument ") << i << " must be a ranked tensor, got "
                                           << arg.getType();
      if (bufferIndex.count(sym.getValue()))
        return fn.emitOpError("arguments tie graph.state ") << sym << " twice";
      SmallVector<int64_t> shape(t.getShape());
      for (int64_t &d : shape)
        if (ShapedType::isDynamic(d))
          d = -1;
      vi.buffer = buffer(sym.getValue().str(), dtypeOf(t.getElementType()),
                         shape, "state");
    }
    set(arg, vi);
  }
  for (Operation &op : entry)
    if (failed(lowerOp(&op)))
      return failure();
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  if (auto n = dyn_cast<graph::RMSNormOp>(op))
    return lowerNorm(n);
  if (isa<graph::LinearW4A16Op, graph::LinearBF16Op>(op))
    return lowerLinearGroup(op);
  if (auto add = dyn_cast<graph::AddOp>(op)) {
    ValueInfo vi;
    vi.kind = ValueInfo::Residual;
    vi.base = add.getLhs();
    vi.acc = add.getRhs();
    set(add.getResult(), vi);
    return success();
  }
  if (auto conv = dyn_cast<graph::KdaShortConvOp>(op)) {
    const ValueInfo *x = get(op, conv.getInput());
    const ValueInfo *w = get(op, conv.getWindow());
    if (!x || !w)
      return failure();
    if (x->kind != ValueInfo::Buffer || w->kind != ValueInfo::Buffer)
      return conv.emitOpError("expects a projection and a window state");
    ValueInfo o{ValueInfo::Conv, x->buffer, w->buffer};
    set(conv.getOutput(), o);
    set(conv.getNewWindow(), ValueInfo{ValueInfo::Window, w->buffer, ""});
    return success();
  }
  if (auto kda = dyn_cast<graph::KdaGatedDeltaOp>(op))
    return lowerKda(kda);
  if (auto e = dyn_cast<graph::EmbeddingOp>(op)) {
    // The token's row is the kernel's @hidden_in (the emitter points it at
    // the row), so the first norm reads it as a block's input.
    if (e.getToken() != fn.getArgument(0))
      return e.emitOpError("looks up the step's token id (argument 0) only");
    if (!embedding.empty())
      return e.emitOpError("a step has one embedding lookup");
    embedding = e.getWeight().str();
    set(e.getOutput(), ValueInfo{ValueInfo::Buffer, buffer("hidden_in", "bf16", {hidden}, "io"),
                                 ""});
    return success();
  }
  if (auto a = dyn_cast<graph::ArgmaxOp>(op)) {
    const ValueInfo *x = get(op, a.getInput());
    if (!x)
      return failure();
    if (x->kind != ValueInfo::Buffer || x->offset)
      return a.emitOpError("expects stored logits");
    const int64_t n = a.getInput().getType().getDimSize(0);
    // The best (value, index) key and the instances done, zeroed each step.
    std::string scratch = accumulator("argmax.scratch", 4);
    std::string out = buffer("next_token", "i32", {1}, "io");
    TaskSpec &t = task("argmax", schedule::TaskKind::Argmax, op);
    t.reads = {x->buffer, scratch};
    t.writes = {out, scratch};
    setArg(t, "input", x->buffer);
    setArg(t, "output", out);
    setArg(t, "scratch", scratch);
    setArg(t, "n", n);
    set(a.getIndex(), ValueInfo{ValueInfo::Buffer, out, ""});
    return success();
  }
  if (auto n = dyn_cast<graph::KdaGatedNormOp>(op)) {
    // One task per head, after the head's state update: it reads the KDA
    // output and the gate and stores the normalized, gated rows.
    const ValueInfo *x = get(op, n.getInput()), *g = get(op, n.getGate());
    if (!x || !g)
      return failure();
    if (x->kind != ValueInfo::Buffer || g->kind != ValueInfo::Buffer || x->offset ||
        g->offset)
      return n.emitOpError("expects the stored KDA output and a stored gate projection");
    std::string w = n.getWeight().str();
    const int64_t c = n.getHeads() * n.getHeadDim();
    std::string z = buffer(layerOf(w) + ".attn.kda_z", "bf16", {c});
    TaskSpec &t = task(w, schedule::TaskKind::KdaGatedNorm, op);
    t.reads = {x->buffer, g->buffer};
    t.writes = {z};
    setArg(t, "input", x->buffer);
    setArg(t, "gate", g->buffer);
    setArg(t, "output", z);
    setArg(t, "weight", w);
    setArg(t, "heads", int64_t(n.getHeads()));
    setArg(t, "head_dim", int64_t(n.getHeadDim()));
    setArg(t, "eps", n.getEps().convertToDouble());
    // Its heads are the KDA task's units: each waits only for its own head's
    // state update, and the output projection's split-K tiles only for
    // their heads.
    // The gate's projection tiles are ordered by head likewise.
    StringAttr unit;
    for (TaskSpec &p : tasks)
      if (p.kind == schedule::TaskKind::KdaHeadChunk && llvm::is_contained(p.writes, x->buffer))
        unit = dyn_cast_or_null<StringAttr>(p.args.get("unit"));
    if (unit) {
      setArg(t, "unit", unit.str());
      for (TaskSpec &p : tasks)
        if (p.kind == schedule::TaskKind::W4A16Gemv && p.writes.size() == 1 &&
            p.writes[0] == g->buffer) {
          setArg(p, "unit", unit.str());
          setArg(p, "unit_cols", int64_t(n.getHeadDim()));
        }
    }
    set(n.getOutput(), ValueInfo{ValueInfo::Buffer, z, ""});
    return success();
  }
  if (auto r = dyn_cast<graph::ReshapeOp>(op)) {
    const ValueInfo *x = get(op, r.getInput());
    if (!x)
      return failure();
    set(r.getOutput(), *x);
    return success();
  }
  if (auto s = dyn_cast<graph::SliceOp>(op)) {
    const ValueInfo *x = get(op, s.getInput());
    if (!x)
      return failure();
    if (x->kind != ValueInfo::Buffer ||
        cast<RankedTensorType>(s.getInput().getType()).getRank() != 1)
      return s.emitOpError("slices of buffers of rank 1 only");
    ValueInfo v = *x;
    v.offset += s.getOffset();
    set(s.getOutput(), v);
    return success();
  }
  if (auto n = dyn_cast<graph::HeadRMSNormOp>(op)) {
    const ValueInfo *x = get(op, n.getInput());
    if (!x)
      return failure();
    if (x->kind != ValueInfo::Buffer || x->offset != 0)
      return n.emitOpError("expects a whole stored projection (its heads are normalized by "
                           "the GQA append task)");
    set(n.getOutput(), ValueInfo{ValueInfo::HeadNorm, x->buffer, n.getWeight().str()});
    return success();
  }
  if (auto r = dyn_cast<graph::RopeOp>(op)) {
    const ValueInfo *x = get(op, r.getInput());
    if (!x)
      return failure();
    ValueInfo v = *x;
    if (x->kind == ValueInfo::HeadNorm) {
      // The GQA append task rotates whole heads, rotate-half.
      const int64_t hd = cast<RankedTensorType>(r.getInput().getType()).getDimSize(1);
      if (!r.getRotateHalf() || r.getOffset() != 0 || r.getRopeDim() != hd)
        return r.emitOpError("a head-normalized input is rotated whole (offset 0, rope_dim ")
               << hd << ") and rotate_half; no other form has a lowering";
      v.kind = ValueInfo::HeadNormRope;
    } else {
      if (r.getRotateHalf())
        return r.emitOpError("rotate_half has a lowering only on head-normalized GQA heads");
      v.kind = ValueInfo::Rope;
    }
    set(r.getOutput(), v);
    return success();
  }
  if (auto a = dyn_cast<graph::KvCacheAppendOp>(op)) {
    const ValueInfo *c = get(op, a.getCache());
    if (!c)
      return failure();
    if (c->kind != ValueInfo::Buffer)
      return a.emitOpError("the cache must be a state");
    set(a.getOutput(), ValueInfo{ValueInfo::Append, c->buffer, ""});
    return success();
  }
  if (auto g = dyn_cast<graph::GqaAttentionOp>(op))
    return lowerGqa(g);
  if (auto a = dyn_cast<graph::MlaCacheAppendOp>(op)) {
    const ValueInfo *c = get(op, a.getCache());
    if (!c)
      return failure();
    set(a.getOutput(), ValueInfo{ValueInfo::Append, c->buffer, ""});
    return success();
  }
  if (auto m = dyn_cast<graph::MlaAttentionOp>(op))
    return lowerMla(m);
  if (auto r = dyn_cast<graph::MoeRouterOp>(op)) {
    const ValueInfo *x = get(op, r.getInput());
    if (!x)
      return failure();
    if (x->kind != ValueInfo::Shared)
      return r.emitOpError("expects the normalized input in shared memory");
    std::string name = r.getWeight().str();
    name = name.substr(0, name.size() - strlen(".weight"));
    auto rw = symbols.lookup<graph::WeightOp>(r.getWeight());
    if (!rw || rw.getTensorType().getRank() != 2)
      return r.emitOpError("router weight '") << r.getWeight()
                                               << "' must be a 2-D graph.weight";
    const int64_t experts = rw.getTensorType().getDimSize(0);
    // The unit's logits are rounded to bf16; a sigmoid router's (its
    // correction bias set: the released model's) stay fp32.
    std::string logits = buffer(name + ".logits", r.getBiasAttr() ? "f32" : "bf16", {experts});
    TaskSpec &t = task(name, schedule::TaskKind::Bf16Rows, op);
    t.reads.push_back(x->buffer);
    t.writes.push_back(logits);
    setArg(t, "weight", r.getWeight().str());
    setArg(t, "input", x->buffer);
    setArg(t, "output", logits);
    setArg(t, "rows", experts);
    setArg(t, "k", hidden);
    setCaptures(t, {op});
    ValueInfo v{ValueInfo::Router, logits, ""};
    set(r.getWeights(), v);
    set(r.getIndices(), v);
    return success();
  }
  if (isa<graph::MoeExpertsOp>(op))
    return lowerExperts(op, true);
  if (isa<graph::SharedExpertsOp>(op))
    return lowerExperts(op, false);
  if (auto c = dyn_cast<graph::MoeCombineOp>(op)) {
    auto it = combineAcc.find(op);
    if (it == combineAcc.end())
      return c.emitOpError("has no expert producing into it");
    // round_parts: the shared experts' sum is rounded apart (its own
    // accumulator, which the residual's reader adds).
    set(c.getOutput(), ValueInfo{ValueInfo::Acc, it->second, combineSharedAcc.lookup(op)});
    return success();
  }
  if (auto r = dyn_cast<func::ReturnOp>(op))
    return lowerReturn(r);
  return op->emitOpError("has no schedule lowering");
}

/// residual add (if any) + RMSNorm, recomputed by every block into shared
/// memory; block 0 also stores the residual sum when someone else needs it.
LogicalResult Lowering::lowerNorm(graph::RMSNormOp op) {
  const ValueInfo *x = get(op, op.getInput());
  if (!x)
    return failure();
  std::string name = op.getWeight().str();
  std::string layer = layerOf(name);
  // An MLA latent's norm (its only users append it to a cache): the append
  // task normalizes the row it caches.
  if (x->kind == ValueInfo::Buffer && !op.getOutput().use_empty() &&
      llvm::all_of(op.getOutput().getUsers(),
                   [](Operation *u) { return isa<graph::MlaCacheAppendOp>(u); })) {
    ValueInfo v = *x;
    v.kind = ValueInfo::LatentNorm;
    v.aux = name;
    v.eps = op.getEps().convertToDouble();
    v.roundTwice = op.getRoundTwice();
    set(op.getOutput(), v);
    return success();
  }
  // Every-block norms stage the whole hidden vector: narrower inputs or
  // slices of a wider buffer have no lowering.
  if (op.getInput().getType().getDimSize(0) != hidden)
    return op.emitOpError("normalizes ") << op.getInput().getType().getDimSize(0)
                                         << " values; only the hidden size (" << hidden
                                         << ") has a lowering";
  TaskSpec t;
  std::string base, acc, acc2, out;
  if (x->kind == ValueInfo::Buffer) {
    if (x->offset != 0)
      return op.emitOpError("input is a slice at offset ")
             << x->offset << " of a stored value; only whole values have a lowering";
    base = x->buffer;
  } else if (x->kind == ValueInfo::Residual) {
    const ValueInfo *bi = get(op, x->base), *ai = get(op, x->acc);
    if (!bi || !ai)
      return failure();
    if (bi->kind != ValueInfo::Buffer || ai->kind != ValueInfo::Acc)
      return op.emitOpError("residual must add an fp32-accumulated value to "
                            "a stored one");
    base = bi->buffer;
    acc = ai->buffer;
    acc2 = ai->aux;
    // The sum is the next residual's base.
    out = buffer(name + ".residual", "bf16", {hidden});
    set(op.getInput(), ValueInfo{ValueInfo::Buffer, out, ""});
  } else {
    return op.emitOpError("input must be stored or a residual add");
  }
  std::string xs = buffer(name + ".out", "f32", {hidden}, "shared");
  TaskSpec &tk = task(name, schedule::TaskKind::ResidualRmsnorm, op);
  tk.partition = schedule::Partition::EveryBlock;
  tk.reads.push_back(base);
  if (!acc.empty())
    tk.reads.push_back(acc);
  if (!acc2.empty())
    tk.reads.push_back(acc2);
  if (!out.empty())
    tk.writes.push_back(out);
  tk.writes.push_back(xs);
  setArg(tk, "base", base);
  setArg(tk, "acc", acc);
  setArg(tk, "acc2", acc2);
  setArg(tk, "out", out);
  setArg(tk, "weight", name);
  setArg(tk, "dim", hidden);
  setArg(tk, "eps", op.getEps().convertToDouble());
  if (op.getRoundTwice())
    setArg(tk, "roundings", int64_t(2));
  setArg(tk, "xs", xs);
  setCaptures(tk, {op.getOperation()});
  set(op.getOutput(), ValueInfo{ValueInfo::Shared, xs, ""});
  return success();
}

/// A fusion group (or a single linear): one grouped W4A16 task over all W4A16
/// members plus one bf16-rows task per bf16 member.
LogicalResult Lowering::lowerLinearGroup(Operation *first) {
  SmallVector<Operation *> members;
  auto group = first->getAttrOfType<StringAttr>(schedule::kFusionGroupAttr);
  if (group) {
    if (!loweredGroups.insert(group.getValue()).second) {
      // Lowered with its group's first member, which reads the same input.
      if (groupMembers.contains(first))
        return success();
      return first->emitOpError("fusion group '")
             << group.getValue() << "' has members that read different inputs";
    }
    for (Operation *u : first->getOperand(0).getUsers())
      if (u->getAttrOfType<StringAttr>(schedule::kFusionGroupAttr) == group) {
        members.push_back(u);
        groupMembers.insert(u);
      }
    llvm::sort(members, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
  } else {
    members.push_back(first);
  }
  const ValueInfo *x = get(first, first->getOperand(0));
  if (!x)
    return failure();

  SmallVector<std::string> weights, outputs;
  SmallVector<int64_t> ns;
  SmallVector<Operation *> gemvs; // in the order of weights and outputs
  int64_t k = cast<RankedTensorType>(first->getOperand(0).getType()).getDimSize(0);
  bool accumulate = false;
  std::string name;
  for (Operation *m : members) {
    auto lin = dyn_cast<graph::LinearW4A16Op>(m);
    if (!lin)
      continue;
    gemvs.push_back(m);
    int64_t n = lin.getOutput().getType().getDimSize(0);
    std::string w = lin.getWeight().str();
    // A projection whose only use is a residual add accumulates in fp32
    // (split-K); the add's reader rounds it once.
    bool toResidual = lin->hasOneUse() && isa<graph::AddOp>(*lin->user_begin());
    if (toResidual && members.size() > 1)
      return lin.emitOpError("a fused projection cannot feed a residual");
    if (toResidual) {
      accumulate = true;
      std::string acc = accumulator(w + ".acc", n);
      outputs.push_back(acc);
      set(lin.getOutput(), ValueInfo{ValueInfo::Acc, acc, ""});
    } else {
      std::string out = buffer(w + ".out", "bf16", {n});
      outputs.push_back(out);
      set(lin.getOutput(), ValueInfo{ValueInfo::Buffer, out, ""});
    }
    weights.push_back(w);
    ns.push_back(n);
    name = name.empty() ? (group ? group.getValue().str() : w) : name;
  }
  if (!weights.empty()) {
    // One task reads all the group's weights: they share a quantization
    // group (each weight's own stays on its schedule.weight).
    int64_t group = 0;
    for (const std::string &w : weights) {
      graph::QuantizedWeightOp qw = quantized(first, w);
      if (!qw)
        return failure();
      if (group && qw.getGroup() != group)
        return first->emitOpError("fused projections quantized in different groups (")
               << group << " and " << qw.getGroup() << ")";
      group = qw.getGroup();
    }
    TaskSpec &t = task(name, schedule::TaskKind::W4A16Gemv, first);
    t.reads.push_back(x->buffer);
    for (const std::string &o : outputs)
      (accumulate ? t.accums : t.writes).push_back(o);
    setArg(t, "weights", weights);
    setArg(t, "outputs", outputs);
    setArg(t, "n", ns);
    setArg(t, "k", k);
    setArg(t, "group", group);
    setArg(t, "input", x->buffer);
    setArg(t, "input_offset", x->offset);
    setArg(t, "epilogue", std::string(accumulate ? "atomic_f32" : "bf16"));
    setCaptures(t, gemvs);
    if (x->kind != ValueInfo::Shared && x->kind != ValueInfo::Buffer)
      return first->emitOpError("input must be stored or in shared memory");
  }
  for (Operation *m : members) {
    auto lin = dyn_cast<graph::LinearBF16Op>(m);
    if (!lin)
      continue;
    if (x->kind != ValueInfo::Shared)
      return lin.emitOpError("bf16 linears read the normalized input");
    std::string w = lin.getWeight().str();
    int64_t rows = lin.getOutput().getType().getDimSize(0);
    std::string out = buffer(w + ".out", "bf16", {rows});
    TaskSpec &t = task(w, schedule::TaskKind::Bf16Rows, m);
    t.reads.push_back(x->buffer);
    t.writes.push_back(out);
    setArg(t, "weight", w);
    setArg(t, "input", x->buffer);
    setArg(t, "output", out);
    setArg(t, "rows", rows);
    setArg(t, "k", k);
    setCaptures(t, {m});
    set(lin.getOutput(), ValueInfo{ValueInfo::Buffer, out, ""});
  }
  return success();
}

LogicalResult Lowering::lowerKda(graph::KdaGatedDeltaOp op) {
  const ValueInfo *q = get(op, op.getQ()), *k = get(op, op.getK()),
                  *v = get(op, op.getV()), *g = get(op, op.getGRaw()),
                  *beta = get(op, op.getBetaLogits()),
                  *s = get(op, op.getState());
  if (!q || !k || !v || !g || !beta || !s)
    return failure();
  if (q->kind != ValueInfo::Conv || k->kind != ValueInfo::Conv ||
      v->kind != ValueInfo::Conv)
    return op.emitOpError("q, k and v must come from kda_short_conv");
  if (g->kind != ValueInfo::Buffer || beta->kind != ValueInfo::Buffer ||
      s->kind != ValueInfo::Buffer)
    return op.emitOpError("g, beta and the state must be stored");
  auto conv = op.getQ().getDefiningOp<graph::KdaShortConvOp>();
  if (!conv)
    return op.emitOpError("q must come directly from graph.kda_short_conv");
  // The task recomputes all three convs from one weight: q, k and v take
  // its slices 0, 1 and 2.
  {
    Value qkv[3] = {op.getQ(), op.getK(), op.getV()};
    for (int i = 0; i < 3; ++i) {
      auto c = qkv[i].getDefiningOp<graph::KdaShortConvOp>();
      if (!c || c.getWeight() != conv.getWeight() ||
          static_cast<int64_t>(c.getConvIndex()) != i)
        return op.emitOpError("q, k and v must be kda_short_conv slices 0, 1 and 2 of one "
                              "weight (")
               << conv.getWeightAttr() << ")";
    }
  }
  // The conv's taps: the window holds the previous taps - 1 rows.
  const int64_t taps = conv.getWindow().getType().getDimSize(0) + 1;
  std::string convW = conv.getWeight().str();
  std::string layer = layerOf(convW);
  int64_t c = op.getHeads() * op.getHeadDim();
  std::string o = buffer(layer + ".attn.kda_o", "bf16", {c});
  std::string unit = layer + ".kda_head";

  TaskSpec &t = task(layer + ".attn.gated_delta", schedule::TaskKind::KdaHeadChunk, op);
  t.reads = {q->buffer, k->buffer, v->buffer, g->buffer, beta->buffer,
             q->aux, k->aux, v->aux, s->buffer};
  t.writes = {s->buffer, o};
  setArg(t, "q", q->buffer);
  setArg(t, "k", k->buffer);
  setArg(t, "v", v->buffer);
  setArg(t, "g", g->buffer);
  setArg(t, "beta", beta->buffer);
  setArg(t, "cq", q->aux);
  setArg(t, "ck", k->aux);
  setArg(t, "cv", v->aux);
  setArg(t, "S", s->buffer);
  setArg(t, "o", o);
  setArg(t, "conv_w", convW);
  setArg(t, "heads", op.getHeads());
  setArg(t, "head_dim", op.getHeadDim());
  setArg(t, "conv", taps);
  setArg(t, "unit", unit);
  // The released form: L2-normalized q and k, the low-rank decay.
  if (std::optional<llvm::APFloat> eps = op.getQkL2Eps())
    setArg(t, "qk_l2_eps", eps->convertToDouble());
  if (op.getALog()) {
    setArg(t, "a_log", op.getALog()->str());
    setArg(t, "dt_bias", op.getDtBias()->str());
  }
  set(op.getOutput(), ValueInfo{ValueInfo::Buffer, o, ""});
  set(op.getNewState(), ValueInfo{ValueInfo::Buffer, s->buffer, ""});

  // The windows shift after every KDA task of the layer has read them.
  TaskSpec &w = task(layer + ".attn.conv_commit", schedule::TaskKind::ConvCommit, conv);
  w.reads = {q->buffer, k->buffer, v->buffer, q->aux, k->aux, v->aux};
  w.writes = {q->aux, k->aux, v->aux};
  setArg(w, "q", q->buffer);
  setArg(w, "k", k->buffer);
  setArg(w, "v", v->buffer);
  setArg(w, "cq", q->aux);
  setArg(w, "ck", k->aux);
  setArg(w, "cv", v->aux);
  setArg(w, "channels", c);
  setArg(w, "conv", taps);
  // The group's projection tiles are ordered by head for the KDA tasks
  // (and, in the released form, the low-rank decay's second projection's).
  for (TaskSpec &p : tasks)
    if (p.kind == schedule::TaskKind::W4A16Gemv &&
        (llvm::is_contained(p.writes, q->buffer) || llvm::is_contained(p.writes, g->buffer))) {
      setArg(p, "unit", unit);
      setArg(p, "unit_cols", op.getHeadDim());
    } else if (p.kind == schedule::TaskKind::Bf16Rows &&
               llvm::is_contained(p.writes, beta->buffer)) {
      setArg(p, "unit", unit);
    }
  return success();
}

LogicalResult Lowering::lowerMla(graph::MlaAttentionOp op) {
  if (!op->hasAttr(schedule::kAbsorbedAttr))
    return op.emitOpError("materialized MLA attention has no lowering; run "
                          "graph-absorb-mla first");
  const ValueInfo *q = get(op, op.getQ()), *ckv = get(op, op.getCKv()),
                  *kr = get(op, op.getKRope());
  if (!q || !ckv || !kr)
    return failure();
  // q rotated (RoPE) or as projected (the rope parts used unrotated).
  const bool rotary = q->kind == ValueInfo::Rope;
  if ((!rotary && (q->kind != ValueInfo::Buffer || q->offset != 0)) ||
      ckv->kind != ValueInfo::Append || kr->kind != ValueInfo::Append)
    return op.emitOpError("expects q (rotated or as projected) and appended caches");
  auto ckvAppend = op.getCKv().getDefiningOp<graph::MlaCacheAppendOp>();
  auto krAppend = op.getKRope().getDefiningOp<graph::MlaCacheAppendOp>();
  if (!ckvAppend || !krAppend)
    return op.emitOpError("the caches must come directly from graph.mla_cache_append");
  const int64_t lora = cast<RankedTensorType>(op.getCKv().getType()).getDimSize(1);
  graph::QuantizedWeightOp kvbWeight = quantized(op, op.getKvB());
  if (!kvbWeight)
    return failure();
  const ValueInfo *row = get(op, ckvAppend.getRow());
  const ValueInfo *krRow = get(op, krAppend.getRow());
  // The latent row as projected, or normalized (graph.rmsnorm of it).
  if (!row || !krRow ||
      (row->kind != ValueInfo::Buffer && row->kind != ValueInfo::LatentNorm) ||
      krRow->kind != (rotary ? ValueInfo::Rope : ValueInfo::Buffer) ||
      krRow->buffer != row->buffer || row->offset != 0 || krRow->offset != lora)
    return op.emitOpError("expects c and k_rope to be slices of one kv_a "
                          "output [c, kr], k_rope rotated as q is");
  graph::RopeOp rope;
  if (rotary) {
    rope = op.getQ().getDefiningOp<graph::RopeOp>();
    if (!rope)
      return op.emitOpError("q must come directly from graph.rope");
    // The append task rotates q's last qk_rope dims of each head and the
    // k-rope row with one theta.
    auto kRope = krAppend.getRow().getDefiningOp<graph::RopeOp>();
    if (static_cast<int64_t>(rope.getOffset()) != static_cast<int64_t>(op.getQkNope()) ||
        rope.getRopeDim() != op.getQkRope())
      return op.emitOpError("q's rope must rotate dims [qk_nope, qk_nope + qk_rope) = [")
             << op.getQkNope() << ", " << op.getQkNope() + op.getQkRope() << ") of each head";
    if (!kRope || kRope.getOffset() != 0 || kRope.getRopeDim() != op.getQkRope() ||
        kRope.getTheta() != rope.getTheta())
      return op.emitOpError("the k-rope row must be graph.rope of all its ")
             << op.getQkRope() << " dims with q's theta";
  }
  std::string kvb = op.getKvB().str();
  std::string layer = layerOf(kvb);
  int64_t hm = op.getHeads(), nope = op.getQkNope(), rd = op.getQkRope(),
          vh = op.getVHead();
  std::string qRope = buffer(layer + ".attn.q_rope", "bf16", {hm * rd});
  std::string qAbs = buffer(layer + ".attn.q_abs", "f32", {hm * lora});
  std::string pm = buffer(layer + ".attn.part_m", "f32", {hm});
  std::string pl = buffer(layer + ".attn.part_l", "f32", {hm});
  // The partial sums in the element type mla-partials names (f32 or bf16).
  std::string pa = buffer(layer + ".attn.part_acc", mlaPartials, {hm * lora});
  // The attention output o: fp32 sums of the combine's latent-dim slices,
  // rounded to bf16 (the spec's o) by the o_proj tiles that stage it.
  std::string o = accumulator(layer + ".attn.mla_o", hm * vh);
  // The layer's dimensions, each task given those its kind declares.
  const std::pair<const char *, int64_t> dimensions[] = {
      {"heads", hm}, {"nope", nope}, {"rope", rd}, {"v_head", vh},
      {"lora", lora}, {"group", kvbWeight.getGroup()}};
  auto common = [&](TaskSpec &t, std::initializer_list<StringRef> names) {
    for (const auto &[name, value] : dimensions)
      if (llvm::is_contained(names, name))
        setArg(t, name, value);
  };
  TaskSpec &a = task(layer + ".attn.rope_append", schedule::TaskKind::MlaRopeAppend,
                     rotary ? rope.getOperation() : ckvAppend.getOperation());
  a.reads = {q->buffer, row->buffer, ckv->buffer, kr->buffer};
  a.writes = {qRope, ckv->buffer, kr->buffer};
  setArg(a, "q", q->buffer);
  setArg(a, "kv", row->buffer);
  setArg(a, "q_rope", qRope);
  setArg(a, "c_kv", ckv->buffer);
  setArg(a, "k_rope", kr->buffer);
  if (rotary)
    setArg(a, "theta", rope.getTheta().convertToDouble());
  if (row->kind == ValueInfo::LatentNorm) {
    setArg(a, "latent_norm", row->aux);
    setArg(a, "latent_eps", row->eps);
    if (row->roundTwice)
      setArg(a, "latent_roundings", int64_t(2));
  }
  common(a, {"heads", "nope", "rope", "lora"});

  TaskSpec &qa = task(layer + ".attn.q_absorb", schedule::TaskKind::MlaQAbsorb, op);
  qa.reads = {q->buffer};
  qa.writes = {qAbs};
  setArg(qa, "q", q->buffer);
  setArg(qa, "q_abs", qAbs);
  setArg(qa, "kv_b", kvb);
  common(qa, {"heads", "nope", "rope", "v_head", "lora"});

  TaskSpec &at = task(layer + ".attn.attention", schedule::TaskKind::MlaAttentionChunk, op);
  at.reads = {qAbs, qRope, ckv->buffer, kr->buffer};
  at.writes = {pm, pl, pa};
  setArg(at, "q_abs", qAbs);
  setArg(at, "q_rope", qRope);
  setArg(at, "c_kv", ckv->buffer);
  setArg(at, "k_rope", kr->buffer);
  setArg(at, "part_m", pm);
  setArg(at, "part_l", pl);
  setArg(at, "part_acc", pa);
  setArg(at, "scale", 1.0 / std::sqrt(double(nope + rd)));
  common(at, {"heads", "rope", "lora"});

  TaskSpec &cw = task(layer + ".attn.combine_wv", schedule::TaskKind::MlaCombineWv, op);
  cw.reads = {pm, pl, pa};
  cw.accums = {o};
  setArg(cw, "part_m", pm);
  setArg(cw, "part_l", pl);
  setArg(cw, "part_acc", pa);
  setArg(cw, "o", o);
  setArg(cw, "kv_b", kvb);
  setArg(cw, "unit", layer + ".mla_head");
  common(cw, {"heads", "nope", "v_head", "lora", "group"});
  set(op.getOutput(), ValueInfo{ValueInfo::Buffer, o, ""});
  return success();
}

/// Grouped-query attention: one task normalizes and rotates the q and k
/// heads and appends the new key and value rows, one per (chunk, kv head)
/// computes partial softmax sums, one per query head merges them into o
/// (bf16), the output projection's input.
LogicalResult Lowering::lowerGqa(graph::GqaAttentionOp op) {
  const ValueInfo *q = get(op, op.getQ()), *kc = get(op, op.getKCache()),
                  *vc = get(op, op.getVCache());
  if (!q || !kc || !vc)
    return failure();
  if (q->kind != ValueInfo::HeadNormRope || kc->kind != ValueInfo::Append ||
      vc->kind != ValueInfo::Append)
    return op.emitOpError("expects head-normalized, rotated queries and appended caches");
  auto kAppend = op.getKCache().getDefiningOp<graph::KvCacheAppendOp>();
  auto vAppend = op.getVCache().getDefiningOp<graph::KvCacheAppendOp>();
  if (!kAppend || !vAppend)
    return op.emitOpError("the caches must come directly from graph.kv_cache_append");
  const ValueInfo *kRow = get(op, kAppend.getRow()), *vRow = get(op, vAppend.getRow());
  if (!kRow || !vRow)
    return failure();
  if (kRow->kind != ValueInfo::HeadNormRope)
    return op.emitOpError("the key row must be head-normalized and rotated as the queries are");
  if (vRow->kind != ValueInfo::Buffer || vRow->offset != 0)
    return op.emitOpError("the value row must be a whole stored projection");
  auto qRope = op.getQ().getDefiningOp<graph::RopeOp>();
  auto kRope = kAppend.getRow().getDefiningOp<graph::RopeOp>();
  auto qNorm = qRope ? qRope.getInput().getDefiningOp<graph::HeadRMSNormOp>() : nullptr;
  auto kNorm = kRope ? kRope.getInput().getDefiningOp<graph::HeadRMSNormOp>() : nullptr;
  if (!qRope || !kRope || !qNorm || !kNorm)
    return op.emitOpError("q and the key row must be graph.rope of graph.head_rmsnorm");
  if (qRope.getTheta() != kRope.getTheta() || qNorm.getEps() != kNorm.getEps())
    return op.emitOpError("q and k must be rotated with one theta and normalized with one eps");
  auto qt = cast<RankedTensorType>(op.getQ().getType());
  auto ct = cast<RankedTensorType>(op.getKCache().getType());
  const int64_t hq = qt.getDimSize(0), hd = qt.getDimSize(1), hkv = ct.getDimSize(1);
  std::string layer = layerOf(q->aux);
  std::string qOut = buffer(layer + ".attn.q_rot", "bf16", {hq * hd});
  std::string pm = buffer(layer + ".attn.part_m", "f32", {hq});
  std::string pl = buffer(layer + ".attn.part_l", "f32", {hq});
  std::string pa = buffer(layer + ".attn.part_acc", "f32", {hq * hd});
  std::string o = buffer(layer + ".attn.gqa_o", "bf16", {hq * hd});
  auto common = [&](TaskSpec &t) {
    setArg(t, "heads", hq);
    setArg(t, "head_dim", hd);
  };
  TaskSpec &a = task(layer + ".attn.rope_append", schedule::TaskKind::GqaRopeAppend, qRope);
  a.reads = {q->buffer, kRow->buffer, vRow->buffer, kc->buffer, vc->buffer};
  a.writes = {qOut, kc->buffer, vc->buffer};
  setArg(a, "q", q->buffer);
  setArg(a, "k", kRow->buffer);
  setArg(a, "v", vRow->buffer);
  setArg(a, "q_out", qOut);
  setArg(a, "k_cache", kc->buffer);
  setArg(a, "v_cache", vc->buffer);
  setArg(a, "q_norm", q->aux);
  setArg(a, "k_norm", kRow->aux);
  setArg(a, "kv_heads", hkv);
  setArg(a, "theta", qRope.getTheta().convertToDouble());
  setArg(a, "eps", qNorm.getEps().convertToDouble());
  common(a);

  TaskSpec &at = task(layer + ".attn.attention", schedule::TaskKind::GqaAttentionChunk, op);
  at.reads = {qOut, kc->buffer, vc->buffer};
  at.writes = {pm, pl, pa};
  setArg(at, "q", qOut);
  setArg(at, "k_cache", kc->buffer);
  setArg(at, "v_cache", vc->buffer);
  setArg(at, "part_m", pm);
  setArg(at, "part_l", pl);
  setArg(at, "part_acc", pa);
  setArg(at, "kv_heads", hkv);
  common(at);

  TaskSpec &cb = task(layer + ".attn.combine", schedule::TaskKind::GqaCombine, op);
  cb.reads = {pm, pl, pa};
  cb.writes = {o};
  setArg(cb, "part_m", pm);
  setArg(cb, "part_l", pl);
  setArg(cb, "part_acc", pa);
  setArg(cb, "o", o);
  common(cb);
  set(op.getOutput(), ValueInfo{ValueInfo::Buffer, o, ""});
  return success();
}

/// Routed (top-k of the router) or shared experts: gate/up tiles into an fp32
/// intermediate, down tiles accumulated into the MoE sum.
LogicalResult Lowering::lowerExperts(Operation *op, bool routed) {
  Value input = op->getOperand(0);
  const ValueInfo *x = get(op, input);
  if (!x)
    return failure();
  if (x->kind != ValueInfo::Shared)
    return op->emitOpError("expects the normalized input in shared memory");
  if (!op->hasOneUse() || !isa<graph::MoeCombineOp>(*op->user_begin()))
    return op->emitOpError("result must feed graph.moe_combine");
  Operation *combine = *op->user_begin();
  auto sym = [&](StringRef n) {
    return op->getAttrOfType<FlatSymbolRefAttr>(n).getValue().str();
  };
  std::string gate = sym("gate"), up = sym("up"), down = sym("down");
  graph::QuantizedWeightOp gateWeight = quantized(op, gate);
  if (!gateWeight)
    return failure();
  // [experts, hidden, inter], or [hidden, inter] for a dense FFN (one
  // expert).
  const int64_t experts = std::max<int64_t>(1, gateWeight.getNumExperts()),
                inter = gateWeight.getOutDim();
  graph::MoeRouterOp router;
  if (routed) {
    router = op->getOperand(1).getDefiningOp<graph::MoeRouterOp>();
    if (!router)
      return op->emitOpError("weights must come from graph.moe_router");
  }
  // Names under the weights' prefix: "blocks.3.moe" (the MoE's experts)
  // or "blocks.0.mlp" (a dense FFN, lowered as a one-expert shared expert).
  std::string ffn = StringRef(gate).rsplit('.').first.str();
  std::string what = routed ? "experts" : "shared_experts";
  // The experts' bf16 steps (bf16_steps): the routed experts' outputs are
  // rounded too, so their down tasks take whole sums; shared experts whose
  // combine rounds its parts apart (round_parts) add into their own sum.
  const bool steps = op->hasAttr("bf16_steps");
  const bool apart = !routed && cast<graph::MoeCombineOp>(combine).getRoundParts();
  std::string &acc = apart ? combineSharedAcc[combine] : combineAcc[combine];
  if (acc.empty())
    acc = accumulator(ffn + (apart ? ".shared_acc" : ".acc"), hidden);
  // Routed: one slot per chosen expert; shared: one per shared expert.
  int64_t slots = routed ? router.getTopK() : experts;
  // Per slot, the fp32 gate and up sums ([2][inter]), accumulated by
  // split-K tiles; the down tasks form silu(gate) * up from them.
  std::string sums =
      accumulator(ffn + "." + what + ".gate_up_sums", 2 * slots * inter);
  std::string logits;
  if (routed) {
    const ValueInfo *r = get(op, op->getOperand(1));
    if (!r || r->kind != ValueInfo::Router)
      return op->emitOpError("weights must come from graph.moe_router");
    logits = r->buffer;
  }
  auto common = [&](TaskSpec &t) {
    setArg(t, "slots", slots);
    setArg(t, "experts", experts);
    setArg(t, "hidden", hidden);
    setArg(t, "inter", inter);
    setArg(t, "group", gateWeight.getGroup());
    setArg(t, "sums", sums);
    setArg(t, "unit", ffn + "." + what + ".slot");
    if (routed) {
      setArg(t, "logits", logits);
      setArg(t, "top_k", router.getTopK());
      setArg(t, "scaling", router.getScaling().convertToDouble());
      // The released model's sigmoid router: its correction bias.
      if (FlatSymbolRefAttr bias = router.getBiasAttr())
        setArg(t, "router_bias", bias.getValue().str());
      t.reads.push_back(logits);
    }
  };
  TaskSpec &gu = task(ffn + "." + what + ".gate_up", schedule::TaskKind::MoeGateUp, op);
  gu.reads.push_back(x->buffer);
  gu.accums.push_back(sums);
  setArg(gu, "gate", gate);
  setArg(gu, "up", up);
  setArg(gu, "input", x->buffer);
  common(gu);
  TaskSpec &dn = task(ffn + "." + what + ".down", schedule::TaskKind::MoeDown, op);
  dn.reads.push_back(sums);
  dn.accums.push_back(acc);
  setArg(dn, "down", down);
  setArg(dn, "acc", acc);
  if (steps)
    setArg(dn, "bf16_steps", std::string(routed ? "hidden_and_output" : "hidden"));
  common(dn);
  return success();
}

LogicalResult Lowering::lowerReturn(func::ReturnOp op) {
  if (op.getNumOperands() == 0)
    return op.emitOpError("must return the new hidden state (and the new decode state)");
  if (!embedding.empty()) {
    // The whole model returns the next token (the argmax's io buffer) and
    // the logits it was taken from.
    const ValueInfo *next = op.getNumOperands() > 1 ? get(op, op.getOperand(0)) : nullptr;
    const ValueInfo *l = next ? get(op, op.getOperand(1)) : nullptr;
    if (!l || next->kind != ValueInfo::Buffer || next->buffer != "next_token" ||
        l->kind != ValueInfo::Buffer || l->offset)
      return op.emitOpError("a whole model returns its next token (graph.argmax) and the "
                            "stored logits first");
    logits = l->buffer;
    return success();
  }
  const ValueInfo *x = get(op, op.getOperand(0));
  if (!x)
    return failure();
  if (x->kind != ValueInfo::Residual)
    return op.emitOpError("hidden output must be a residual add");
  const ValueInfo *bi = get(op, x->base), *ai = get(op, x->acc);
  if (!bi || !ai || bi->kind != ValueInfo::Buffer || ai->kind != ValueInfo::Acc)
    return op.emitOpError("final residual must add an fp32 sum to a stored "
                          "value");
  std::string out = buffer("hidden_out", "bf16", {hidden}, "io");
  TaskSpec &t = task("final_residual", schedule::TaskKind::FinalResidual, op);
  t.reads = {bi->buffer, ai->buffer};
  if (!ai->aux.empty())
    t.reads.push_back(ai->aux);
  t.writes = {out};
  setArg(t, "base", bi->buffer);
  setArg(t, "acc", ai->buffer);
  setArg(t, "acc2", ai->aux);
  setArg(t, "out", out);
  setArg(t, "dim", hidden);
  return success();
}

/// The number of layers: one past the highest `layer` of the module's
/// weight and state symbols (0 where none carries one).
static int64_t countLayers(ModuleOp module) {
  int64_t n = 0;
  auto see = [&](std::optional<uint64_t> layer) {
    if (layer)
      n = std::max<int64_t>(n, int64_t(*layer) + 1);
  };
  for (Operation &op : *module.getBody()) {
    if (auto w = dyn_cast<graph::WeightOp>(op))
      see(w.getLayer());
    else if (auto q = dyn_cast<graph::QuantizedWeightOp>(op))
      see(q.getLayer());
    else if (auto st = dyn_cast<graph::StateOp>(op))
      see(st.getLayer());
  }
  return n;
}


struct ScheduleFormPhasesPass
    : schedule::impl::ScheduleFormPhasesBase<ScheduleFormPhasesPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// A name the emitted `extern "C"` function (and its file names) can have.
static bool isCIdentifier(StringRef s) {
  if (s.empty() || !(llvm::isAlpha(s[0]) || s[0] == '_'))
    return false;
  return llvm::all_of(s, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

void ScheduleFormPhasesPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The kernel verifier's rule; checked here so that a bad option is one
  // error on the module, not a verifier failure after the pass.
  if (threads < 32 || threads > 1024 || threads % 32) {
    mlir::emitError(module.getLoc(), "schedule-form-phases: threads must be a "
                                     "multiple of 32 in 32..1024, got ")
        << static_cast<int64_t>(threads);
    return signalPassFailure();
  }
  if (maxSharedBytes < 0) {
    mlir::emitError(module.getLoc(), "schedule-form-phases: max-shared-bytes "
                                     "must be >= 0 (0: no limit), got ")
        << static_cast<int64_t>(maxSharedBytes);
    return signalPassFailure();
  }
  if (mlaPartials != "f32" && mlaPartials != "bf16") {
    mlir::emitError(module.getLoc(), "schedule-form-phases: mla-partials must be f32 or "
                                     "bf16, got '")
        << mlaPartials << "'";
    return signalPassFailure();
  }
  if (!kernelName.empty() && !isCIdentifier(kernelName)) {
    mlir::emitError(module.getLoc(), "schedule-form-phases: kernel-name must "
                                     "be a C identifier (letters, digits, '_', "
                                     "not starting with a digit), got '")
        << kernelName << "'";
    return signalPassFailure();
  }
  auto fn = module.lookupSymbol<func::FuncOp>("decode_step");
  if (!fn) {
    // Already lowered (or not a graph module): nothing to do.
    return;
  }
  // What the lowering reads of the signature: a body, the hidden vector
  // first (bf16), then the context length and the state.
  if (fn.isExternal())
    return fn.emitOpError("has no body to lower"), signalPassFailure();
  {
    auto h = fn.getNumArguments() ? dyn_cast<RankedTensorType>(fn.getArgument(0).getType())
                                  : RankedTensorType();
    const bool token = fn.getNumArguments() && fn.getArgument(0).getType().isInteger(32);
    if (!token && (!h || h.getRank() != 1 || h.isDynamicDim(0) || !h.getElementType().isBF16()))
      return fn.emitOpError("argument 0 must be the hidden vector, a static 1-D bf16 tensor, "
                            "or (the whole model) an i32 token id"),
             signalPassFailure();
    if (token && llvm::none_of(fn.getArgument(0).getUsers(),
                               [](Operation *u) { return isa<graph::EmbeddingOp>(u); }))
      return fn.emitOpError("argument 0, a token id, has no graph.embedding lookup"),
             signalPassFailure();
  }
  Lowering lowering(module, fn, mlaPartials);
  if (failed(lowering.run()))
    return signalPassFailure();

  // Dependencies between tasks, from their buffer accesses.
  llvm::StringMap<std::string> space;
  for (const BufferSpec &bs : lowering.buffers)
    space[bs.name] = bs.space;
  const auto &tasks = lowering.tasks;
  // Per buffer, its users in task order with how they touch it (one pass
  // over the tasks); conflicting pairs of users of one buffer are the
  // edges, local only if every buffer they conflict on is per-block shared
  // memory. Linear in the accesses but for a buffer's own users.
  enum : int { R = 1, W = 2, A = 4 };
  llvm::StringMap<SmallVector<std::pair<int, int>>> users;
  for (int t = 0, e = tasks.size(); t < e; ++t)
    for (auto [list, flag] : {std::pair{&tasks[t].reads, int(R)}, std::pair{&tasks[t].writes, int(W)},
                              std::pair{&tasks[t].accums, int(A)}})
      for (const std::string &buf : *list) {
        auto &u = users[buf];
        if (u.empty() || u.back().first != t)
          u.push_back({t, flag});
        else
          u.back().second |= flag;
      }
  std::map<std::pair<int, int>, bool> local; // (consumer, producer) -> local
  for (auto &entry : users) {
    const bool shared = space[entry.getKey()] == "shared";
    const auto &u = entry.getValue();
    for (size_t jj = 0; jj < u.size(); ++jj)
      for (size_t ii = 0; ii < jj; ++ii) {
        const int pf = u[ii].second, cf = u[jj].second;
        const bool pw = pf & W, pr = pf & R, pa = pf & A;
        const bool cw = cf & W, cr = cf & R, ca = cf & A;
        if (((pw || pa) && (cr || cw)) || (pr && (cw || ca)) || (pw && ca)) {
          auto [it, fresh] = local.try_emplace({u[jj].first, u[ii].first}, true);
          if (!shared)
            it->second = false;
        }
      }
  }
  std::vector<planning::DepEdge> edges;
  for (const auto &[key, isLocal] : local)
    edges.push_back({key.second, key.first,
                     isLocal ? planning::DepKind::Local : planning::DepKind::Grid});
  planning::PhasePlan plan;
  std::string error;
  if (!planning::planPhases(tasks.size(), edges, plan, error)) {
    fn.emitOpError(error);
    return signalPassFailure();
  }

  // Build the kernel.
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  std::string name = kernelName;
  if (name.empty()) {
    auto moduleName = module.getSymName();
    if (!moduleName || !isCIdentifier(*moduleName)) {
      mlir::emitError(module.getLoc(), "schedule-form-phases: the graph module "
                                       "needs a C-identifier name (mk_<name> is "
                                       "the kernel's), or pass kernel-name");
      return signalPassFailure();
    }
    name = "mk_" + moduleName->str();
  }
  auto kernel = b.create<schedule::KernelOp>(fn.getLoc(), name, threads);
  kernel.setMaxSharedBytes(maxSharedBytes);
  if (!lowering.embedding.empty()) {
    kernel.setEmbeddingAttr(b.getStringAttr(lowering.embedding));
    kernel.setLogitsAttr(FlatSymbolRefAttr::get(b.getContext(), lowering.logits));
  }
  // The spec as typed attributes (the frontend's `mk.config`), for the
  // manifest; no later stage reads it.
  if (auto config = module->getAttrOfType<DictionaryAttr>("mk.config"))
    kernel.setConfigAttr(config);
  kernel.setNumLayers(countLayers(module));
  if (debugCapture || module->hasAttr("mk.debug_capture"))
    kernel.setDebugCapture(true);
  b.setInsertionPointToEnd(&kernel.getBodyBlock());
  // The parameters the kernel binds, in the signature's order: the graph's
  // weight symbols in theirs, a quantized linear as its three storage
  // tensors (nibble-packed w_q [..., in/2, out], scales and zeros
  // [..., in/group, out]) carrying its group (decode state is the `state`
  // buffers below).
  for (Operation &op : *module.getBody()) {
    if (auto q = dyn_cast<graph::QuantizedWeightOp>(op)) {
      RankedTensorType t = q.getTensorType();
      SmallVector<int64_t> lead(t.getShape().drop_back(2));
      const int64_t in = q.getInDim(), out = q.getOutDim(), group = q.getGroup();
      auto shape = [&](int64_t rows) {
        SmallVector<int64_t> s = lead;
        s.append({rows, out});
        return b.getDenseI64ArrayAttr(s);
      };
      const std::string prefix = q.getSymName().str();
      auto part = [&](const char *suffix, StringRef dtype, int64_t rows) {
        b.create<schedule::WeightOp>(q.getLoc(), b.getStringAttr(prefix + suffix),
                                     b.getStringAttr(dtype), shape(rows),
                                     b.getI64IntegerAttr(group), b.getI64IntegerAttr(0),
                                     b.getStringAttr(""), q.getLayerAttr());
      };
      part(".w_q", "u8", in / 2);
      part(".scales", "bf16", in / group);
      part(".zeros", "bf16", in / group);
    } else if (auto w = dyn_cast<graph::WeightOp>(op)) {
      StringRef dtype = dtypeOf(w.getTensorType().getElementType());
      if (dtype.empty()) {
        w.emitOpError("has an element type no kernel binds: ")
            << w.getTensorType().getElementType();
        return signalPassFailure();
      }
      b.create<schedule::WeightOp>(w.getLoc(), w.getSymNameAttr(), b.getStringAttr(dtype),
                                   b.getDenseI64ArrayAttr(w.getTensorType().getShape()),
                                   b.getI64IntegerAttr(0), b.getI64IntegerAttr(0),
                                   b.getStringAttr(""), w.getLayerAttr());
    }
  }
  SymbolTable symbols(module);
  for (const BufferSpec &bs : lowering.buffers) {
    IntegerAttr layer;
    if (bs.space == "state")
      if (auto st = symbols.lookup<graph::StateOp>(bs.name))
        layer = st.getLayerAttr();
    b.create<schedule::BufferOp>(fn.getLoc(), b.getStringAttr(bs.name),
                                 b.getStringAttr(bs.dtype), b.getDenseI64ArrayAttr(bs.shape),
                                 b.getStringAttr(bs.space), b.getI64IntegerAttr(-1), layer);
  }
  {
    // The kernel's decode-state arguments are its `state` buffers, in order:
    // they must be exactly the graph's state symbols (caches: dynamic rows).
    SmallVector<graph::StateOp> want(module.getOps<graph::StateOp>());
    SmallVector<schedule::BufferOp> have;
    for (auto buf : kernel.getBodyBlock().getOps<schedule::BufferOp>())
      if (buf.getSpace() == "state")
        have.push_back(buf);
    bool same = have.size() == want.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      SmallVector<int64_t> shape(want[i].getTensorType().getShape());
      for (int64_t &d : shape)
        if (ShapedType::isDynamic(d))
          d = -1;
      same = have[i].getSymName() == want[i].getSymName() &&
             have[i].getDtype() == dtypeOf(want[i].getTensorType().getElementType()) &&
             have[i].getShape() == ArrayRef<int64_t>(shape);
    }
    if (!same) {
      fn.emitOpError("lowered decode state does not match the module's graph.state symbols");
      return signalPassFailure();
    }
  }
  auto refs = [&](ArrayRef<std::string> names) {
    SmallVector<Attribute> a;
    for (const std::string &n : names)
      a.push_back(FlatSymbolRefAttr::get(b.getContext(), n));
    return b.getArrayAttr(a);
  };
  // Each phase's tasks in task order (one pass: a scan of every task per
  // phase was quadratic in the depth), and the segment of its last one.
  std::vector<SmallVector<int>> phaseMembers(plan.numPhases);
  std::vector<int> phaseSegment(plan.numPhases, -1);
  for (int t = 0, e = tasks.size(); t < e; ++t) {
    phaseMembers[plan.phase[t]].push_back(t);
    phaseSegment[plan.phase[t]] = plan.segment[t];
  }
  for (int p = 0; p < plan.numPhases; ++p) {
    const int segment = phaseSegment[p];
    SmallVector<int> members = std::move(phaseMembers[p]);
    if (p > 0 && phaseSegment[p - 1] != segment)
      b.create<schedule::BarrierOp>(fn.getLoc());
    // Every-block tasks run first in their phase.
    llvm::stable_sort(members, [&](int x, int y) {
      return tasks[x].partition == schedule::Partition::EveryBlock &&
             tasks[y].partition != schedule::Partition::EveryBlock;
    });
    auto phase = b.create<schedule::PhaseOp>(
        fn.getLoc(), tasks[members.front()].name);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&phase.getBodyBlock());
    for (int t : members) {
      const TaskSpec &ts = tasks[t];
      schedule::TaskOpInterface op =
          schedule::createTaskOp(b, fn.getLoc(), ts.kind, ts.name, ts.op, ts.partition,
                                 ts.args.getDictionary(b.getContext()));
      // A buffer is named once: the access lists keep only what the task's
      // buffer arguments do not already say (TaskKinds.h, TaskAccess).
      const schedule::TaskAccesses byArgs = schedule::taskArgAccesses(op);
      auto rest = [&](const SmallVector<std::string> &names,
                      const SmallVector<StringRef> &derived) {
        SmallVector<std::string> left;
        for (const std::string &n : names)
          if (!llvm::is_contained(derived, n))
            left.push_back(n);
        return refs(left);
      };
      op.setReadsAttr(rest(ts.reads, byArgs.reads));
      op.setWritesAttr(rest(ts.writes, byArgs.writes));
      op.setAccumulatesAttr(rest(ts.accums, byArgs.accumulates));
    }
  }
  // The graph module is now the kernel.
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (&op != kernel.getOperation())
      op.erase();
}

} // namespace
