//===- TaskKinds.cpp - The schedule dialect's task kinds ------------------===//

#include "mk/Dialect/Schedule/TaskKinds.h"

#include "mk/Dialect/Schedule/ScheduleEnums.cpp.inc"
#include "mk/Dialect/Schedule/ScheduleOps.h"

using namespace mlir;

namespace mk::schedule {
namespace {
using T = TaskArgType;
constexpr TaskArgStage P = TaskArgStage::Partitioned;
constexpr TaskArgStage O = TaskArgStage::Optional;

using A = TaskAccess;
constexpr TaskArgStage Formed = TaskArgStage::Formed;
/// A buffer argument the task reads / writes / reads then writes /
/// accumulates into; opt*: the same, where "" (none) is allowed.
constexpr TaskArgSpec in(llvm::StringLiteral n) { return {n, T::Buffer, Formed, false, A::Read}; }
constexpr TaskArgSpec out(llvm::StringLiteral n) { return {n, T::Buffer, Formed, false, A::Write}; }
constexpr TaskArgSpec inout(llvm::StringLiteral n) {
  return {n, T::Buffer, Formed, false, A::ReadWrite};
}
constexpr TaskArgSpec acc(llvm::StringLiteral n, TaskArgStage st = Formed) {
  return {n, T::Buffer, st, false, A::Accumulate};
}
constexpr TaskArgSpec optIn(llvm::StringLiteral n) {
  return {n, T::OptBuffer, Formed, false, A::Read};
}
constexpr TaskArgSpec optOut(llvm::StringLiteral n) {
  return {n, T::OptBuffer, Formed, false, A::Write};
}

const TaskArgSpec kResidualRmsnorm[] = {
    in("base"),          optIn("acc"),     optIn("acc2"), optOut("out"), optOut("xs"),
    {"weight", T::Weight}, {"dim", T::Pos}, {"eps", T::Float}, {"captures", T::Captures},
    {"roundings", T::Pos, O}};
const TaskArgSpec kW4A16Gemv[] = {
    {"weights", T::Weights},
    {"outputs", T::Buffers, Formed, false, A::Output},
    {"n", T::Ints},
    {"k", T::Pos},
    {"group", T::Pos},
    in("input"),
    {"input_offset", T::NonNeg},
    {"unit_cols", T::NonNeg},
    {"epilogue", T::Epilogue, O},
    {"tn", T::Pos, P},
    {"ksplit", T::Pos, P},
    {"tiles", T::Pos, P},
    {"captures", T::Captures},
    // The released KDA's gated output norm staged from `input`
    // (schedule-fuse-kda-gated-norm; all four or none: verifyTaskOp).
    optIn("gated_norm_gate"),
    {"gated_norm_weight", T::Weight, O},
    {"gated_norm_eps", T::Float, O},
    {"gated_norm_head_dim", T::Pos, O},
    // The output's argmax merged by the tiles (schedule-fuse-argmax; both
    // or neither: verifyTaskOp).
    optOut("argmax_output"),
    {"argmax_scratch", T::OptBuffer, Formed, false, A::ReadWrite}};
const TaskArgSpec kBf16Rows[] = {{"weight", T::Weight},
                                 optIn("input"),
                                 out("output"),
                                 {"k", T::Pos},
                                 {"rows", T::Pos},
                                 {"rows_per_task", T::Pos, P},
                                 {"captures", T::Captures},
                                 // Its output stored for polling readers
                                 // (schedule-poll-router-logits).
                                 {"polled_output", T::Flag, O}};
const TaskArgSpec kKdaHeadChunk[] = {
    in("q"), in("k"), in("v"), in("g"), in("beta"), out("o"), inout("S"), in("cq"), in("ck"),
    in("cv"), {"conv_w", T::Weight}, {"conv", T::Pos}, {"head_dim", T::Pos}, {"heads", T::Pos},
    {"chunk", T::Pos, P},
    // The output projection folded in (schedule-fuse-kda-o-proj): its
    // weight [heads * head_dim, o_n] and the fp32 sums it adds to.
    {"o_weight", T::Weight, O}, acc("o_acc", O), {"o_n", T::Pos, O},
    // The released form's L2 norms and low-rank decay.
    {"qk_l2_eps", T::Float, O}, {"a_log", T::Weight, O}, {"dt_bias", T::Weight, O}};
const TaskArgSpec kKdaGatedNorm[] = {in("input"),          in("gate"),         out("output"),
                                     {"weight", T::Weight}, {"heads", T::Pos}, {"head_dim", T::Pos},
                                     {"eps", T::Float}};
const TaskArgSpec kArgmax[] = {in("input"), out("output"), inout("scratch"), {"n", T::Pos}};
const TaskArgSpec kConvCommit[] = {in("q"),    in("k"),    in("v"),
                                   inout("cq"), inout("ck"), inout("cv"),
                                   {"channels", T::Pos}, {"conv", T::Pos}};
const TaskArgSpec kZeroF32[] = {out("buffer"), {"n", T::Pos}};
const TaskArgSpec kFinalResidual[] = {in("base"), in("acc"), optIn("acc2"), out("out"),
                                      {"dim", T::Pos}};
const TaskArgSpec kMlaRopeAppend[] = {in("q"),           in("kv"),           out("q_rope"),
                                      inout("c_kv"),     inout("k_rope"),    {"theta", T::Float, O},
                                      {"lora", T::Pos},  {"heads", T::Pos},  {"nope", T::Pos},
                                      {"rope", T::Pos},  {"latent_norm", T::Weight, O},
                                      {"latent_eps", T::Float, O}, {"latent_roundings", T::Pos, O}};
const TaskArgSpec kMlaQAbsorb[] = {in("q"),          out("q_abs"),     {"kv_b", T::Weight},
                                   {"nope", T::Pos}, {"lora", T::Pos}, {"heads", T::Pos},
                                   {"v_head", T::Pos}, {"rope", T::Pos}};
const TaskArgSpec kMlaAttentionChunk[] = {
    in("q_abs"),         in("q_rope"),          in("c_kv"),
    in("k_rope"),        out("part_m"),         out("part_l"),
    out("part_acc"),     {"scale", T::Float},   {"heads", T::Pos},
    {"lora", T::Pos},    {"rope", T::Pos},      {"head_group", T::Pos, P},
    {"max_chunks", T::Pos, P}, {"sub_rows", T::NonNeg, P}, {"query_parts", T::NonNeg, P},
    {"chunk_rows", T::NonNeg, P}};
const TaskArgSpec kMlaCombineWv[] = {
    in("part_m"),        in("part_l"),     in("part_acc"),  acc("o"),
    {"kv_b", T::Weight}, {"heads", T::Pos}, {"lora", T::Pos}, {"v_head", T::Pos},
    {"nope", T::Pos},    {"group", T::Pos},  {"slices", T::Pos, P}};
const TaskArgSpec kGqaRopeAppend[] = {
    in("q"),           in("k"),           in("v"),
    out("q_out"),      inout("k_cache"),  inout("v_cache"),
    {"q_norm", T::Weight}, {"k_norm", T::Weight}, {"heads", T::Pos},
    {"kv_heads", T::Pos},  {"head_dim", T::Pos},  {"theta", T::Float},
    {"eps", T::Float}};
const TaskArgSpec kGqaAttentionChunk[] = {
    in("q"),           in("k_cache"),     in("v_cache"),   out("part_m"),
    out("part_l"),     out("part_acc"),   {"heads", T::Pos}, {"kv_heads", T::Pos},
    {"head_dim", T::Pos}, {"max_chunks", T::Pos, P}};
const TaskArgSpec kGqaCombine[] = {
    in("part_m"),      in("part_l"),      in("part_acc"),  out("o"),
    {"heads", T::Pos}, {"head_dim", T::Pos}, {"heads_per_task", T::Pos, P}};
const TaskArgSpec kMoeGateUp[] = {
    {"gate", T::Weight}, {"up", T::Weight}, optIn("input"), acc("sums")};
const TaskArgSpec kMoeDown[] = {{"down", T::Weight}, in("sums"), acc("acc"),
                                {"bf16_steps", T::Bf16Steps, O}};
/// Both expert kinds': the slots and their cut, and (routed) the router's.
const TaskArgSpec kExpertArgs[] = {
    optIn("logits"),          {"hidden", T::Pos},  {"inter", T::Pos},
    {"slots", T::Pos},        {"group", T::Pos},   {"tn", T::Pos, P},
    {"ksplit", T::Pos, P},    {"tiles", T::Pos, P},
    {"experts", T::Pos, TaskArgStage::Formed, true},
    {"top_k", T::Pos, TaskArgStage::Formed, true},
    {"scaling", T::Float, TaskArgStage::Formed, true},
    // A sigmoid router's correction bias [experts] (moe_topk_sigmoid);
    // absent: the softmax router.
    {"router_bias", T::Weight, O},
    // The logits polled, not waited for (schedule-poll-router-logits).
    {"poll_logits", T::Flag, O}};

const TaskKindInfo kKinds[] = {
    {TaskKind::ResidualRmsnorm, kResidualRmsnorm},
    {TaskKind::W4A16Gemv, kW4A16Gemv},
    {TaskKind::Bf16Rows, kBf16Rows},
    {TaskKind::KdaHeadChunk, kKdaHeadChunk},
    {TaskKind::ConvCommit, kConvCommit},
    {TaskKind::ZeroF32, kZeroF32},
    {TaskKind::FinalResidual, kFinalResidual},
    {TaskKind::MlaRopeAppend, kMlaRopeAppend},
    {TaskKind::MlaQAbsorb, kMlaQAbsorb},
    {TaskKind::MlaAttentionChunk, kMlaAttentionChunk},
    {TaskKind::MlaCombineWv, kMlaCombineWv},
    {TaskKind::MoeGateUp, kMoeGateUp, kExpertArgs},
    {TaskKind::MoeDown, kMoeDown, kExpertArgs},
    {TaskKind::GqaRopeAppend, kGqaRopeAppend},
    {TaskKind::GqaAttentionChunk, kGqaAttentionChunk},
    {TaskKind::GqaCombine, kGqaCombine},
    {TaskKind::KdaGatedNorm, kKdaGatedNorm},
    {TaskKind::Argmax, kArgmax},
};

const char *describe(TaskArgType t) {
  switch (t) {
  case T::Pos:
    return "an integer in 1..2147483647";
  case T::NonNeg:
    return "an integer in 0..2147483647";
  case T::Float:
    return "a floating-point number";
  case T::Buffer:
    return "a buffer of the kernel, as a symbol (@name)";
  case T::OptBuffer:
    return "a buffer of the kernel, as a symbol (@name), where present";
  case T::Weight:
    return "a weight's name";
  case T::Ints:
    return "a non-empty array of integers in 1..2147483647";
  case T::Weights:
    return "a non-empty array of weight names";
  case T::Buffers:
    return "a non-empty array of buffers of the kernel, as symbols (@name)";
  case T::Captures:
    return "an array of debug-capture names (strings), where present";
  case T::Epilogue:
    return "\"bf16\" or \"atomic_f32\", where present";
  case T::Bf16Steps:
    return "\"hidden\" or \"hidden_and_output\", where present";
  case T::Flag:
    return "a unit attribute, where present";
  }
  return "";
}

} // namespace

ArrayRef<TaskKindInfo> taskKinds() { return kKinds; }

const TaskKindInfo *lookupTaskKind(TaskKind kind) {
  for (const TaskKindInfo &k : kKinds)
    if (k.kind == kind)
      return &k;
  return nullptr;
}

SmallVector<TaskArgSpec> taskArgSpecs(TaskOpInterface t) {
  SmallVector<TaskArgSpec> specs;
  const TaskKindInfo *info = lookupTaskKind(t.getKind());
  if (!info)
    return specs;
  const bool routed = !t.getStrArg("logits").empty();
  for (ArrayRef<TaskArgSpec> list : {info->args, info->familyArgs})
    for (const TaskArgSpec &a : list)
      if (!a.routedOnly || routed)
        specs.push_back(a);
  return specs;
}

/// Argument `name` of `t` as a list: an array's elements, or the one value
/// (empty when absent).
static SmallVector<Attribute> argValues(TaskOpInterface t, StringRef name) {
  SmallVector<Attribute> out;
  Attribute v = t.getArg(name);
  if (auto arr = dyn_cast_or_null<ArrayAttr>(v))
    out.append(arr.begin(), arr.end());
  else if (v)
    out.push_back(v);
  return out;
}

SmallVector<std::string> taskWeights(TaskOpInterface t) {
  SmallVector<std::string> out;
  for (const TaskArgSpec &a : taskArgSpecs(t)) {
    if (a.type != T::Weight && a.type != T::Weights)
      continue;
    for (Attribute n : argValues(t, a.name))
      if (auto s = dyn_cast<StringAttr>(n); s && !s.empty() && !llvm::is_contained(out, s.str()))
        out.push_back(s.str());
  }
  return out;
}

bool readsRoutedWeights(TaskOpInterface t) {
  return llvm::any_of(taskArgSpecs(t), [](const TaskArgSpec &a) { return a.routedOnly; });
}

DictionaryAttr withBufferSymbols(MLIRContext *ctx, TaskKind kind, DictionaryAttr given) {
  NamedAttrList args(given);
  const TaskKindInfo *info = lookupTaskKind(kind);
  if (!info)
    return given;
  for (ArrayRef<TaskArgSpec> list : {info->args, info->familyArgs})
    for (const TaskArgSpec &a : list) {
      if (a.type != T::Buffer && a.type != T::OptBuffer && a.type != T::Buffers)
        continue;
      Attribute v = args.get(a.name);
      if (auto s = dyn_cast_or_null<StringAttr>(v)) {
        if (s.empty())
          args.erase(a.name);
        else
          args.set(a.name, FlatSymbolRefAttr::get(ctx, s.getValue()));
      } else if (auto arr = dyn_cast_or_null<ArrayAttr>(v)) {
        SmallVector<Attribute> refs;
        for (Attribute e : arr)
          if (auto s = dyn_cast<StringAttr>(e))
            refs.push_back(FlatSymbolRefAttr::get(ctx, s.getValue()));
          else
            refs.push_back(e);
        args.set(a.name, ArrayAttr::get(ctx, refs));
      }
    }
  return args.getDictionary(ctx);
}

std::string describeTaskArgs(TaskKind kind) {
  std::string out;
  if (const TaskKindInfo *info = lookupTaskKind(kind))
    for (ArrayRef<TaskArgSpec> list : {info->args, info->familyArgs})
      for (const TaskArgSpec &a : list)
        out += (out.empty() ? "" : ", ") + a.name.str();
  return out;
}

TaskAccesses taskArgAccesses(TaskOpInterface t) {
  TaskAccesses out;
  auto add = [](SmallVector<StringRef> &list, StringRef name) {
    if (!name.empty() && !llvm::is_contained(list, name))
      list.push_back(name);
  };
  const bool atomic = t.getStrArg("epilogue") == "atomic_f32";
  for (const TaskArgSpec &a : taskArgSpecs(t)) {
    if (a.access == A::None)
      continue;
    for (Attribute n : argValues(t, a.name)) {
      auto s = dyn_cast<FlatSymbolRefAttr>(n);
      if (!s)
        continue;
      switch (a.access) {
      case A::None:
        break;
      case A::Read:
        add(out.reads, s.getValue());
        break;
      case A::Write:
        add(out.writes, s.getValue());
        break;
      case A::ReadWrite:
        add(out.reads, s.getValue());
        add(out.writes, s.getValue());
        break;
      case A::Accumulate:
        add(out.accumulates, s.getValue());
        break;
      case A::Output:
        add(atomic ? out.accumulates : out.writes, s.getValue());
        break;
      }
    }
  }
  return out;
}

unsigned maxPrologueWaits(TaskOpInterface t) {
  if (t.getPrologueGuardedBuffers().empty())
    return 0;
  if (auto g = dyn_cast<W4A16GemvOp>(t.getOperation()); g && g.getGatedNormGateAttr())
    return 2;
  return 1;
}

StringRef guardedBesides(TaskOpInterface producer, TaskOpInterface consumer,
                         ArrayRef<StringRef> allowed) {
  const TaskAccesses p = taskAccesses(producer), c = taskAccesses(consumer);
  for (const SmallVector<StringRef> *set : {&p.writes, &p.accumulates})
    for (StringRef b : *set)
      if (!llvm::is_contained(allowed, b) && llvm::is_contained(c.reads, b))
        return b;
  return "";
}

// The kinds whose templates wait in their prologue (TaskOpInterface's
// getPrologueGuardedBuffers): what each stages after its wait.

/// A moe_down's staged gate and up `sums` (its weights, chosen through the
/// router's logits, are asked for first).
SmallVector<StringRef> MoeDownOp::getPrologueGuardedBuffers() { return {getSums()}; }
/// An mla_attention_chunk's absorbed queries (its first cache rows are
/// asked for first).
SmallVector<StringRef> MlaAttentionChunkOp::getPrologueGuardedBuffers() { return {getQAbs()}; }
/// A w4a16_gemv's `input` (its first weights are asked for first; only an
/// input in global memory, which the tile stages: the kernel verifier
/// refuses a wait before a shared one in the prologue), and the gate of a
/// gated norm input, which the tile stages with it.
SmallVector<StringRef> W4A16GemvOp::getPrologueGuardedBuffers() {
  if (std::optional<StringRef> gate = getGatedNormGate())
    return {getInput(), *gate};
  return {getInput()};
}
/// An mla_q_absorb's projected queries (its first W_kv_b rows are loaded
/// first).
SmallVector<StringRef> MlaQAbsorbOp::getPrologueGuardedBuffers() { return {getQ()}; }
/// An mla_combine_wv's chunk partials (its first W_v weights are asked for
/// first).
SmallVector<StringRef> MlaCombineWvOp::getPrologueGuardedBuffers() {
  return {getPartM(), getPartL(), getPartAcc()};
}

TaskAccesses taskAccesses(TaskOpInterface t) {
  TaskAccesses out = taskArgAccesses(t);
  auto addAll = [](SmallVector<StringRef> &list, ArrayAttr refs) {
    for (Attribute r : refs) {
      StringRef name = cast<SymbolRefAttr>(r).getRootReference().getValue();
      if (!llvm::is_contained(list, name))
        list.push_back(name);
    }
  };
  addAll(out.reads, t.getReads());
  addAll(out.writes, t.getWrites());
  addAll(out.accumulates, t.getAccumulates());
  return out;
}

LogicalResult verifyTaskArgs(TaskOpInterface t, TaskArgStage upTo) {
  // The op's own verifier (ODS) has checked each argument's type and range
  // and required the ones every task of the kind has; what it cannot say is
  // when the others are: the partition's, and a routed expert task's.
  for (const TaskArgSpec &a : taskArgSpecs(t)) {
    const bool required = a.type != T::NonNeg && a.type != T::OptBuffer &&
                          a.type != T::Captures && a.type != T::Epilogue &&
                          a.type != T::Bf16Steps && a.type != T::Flag &&
                          (a.stage == TaskArgStage::Formed ||
                           (a.stage == TaskArgStage::Partitioned &&
                            upTo == TaskArgStage::Partitioned));
    if (!required || t.getArg(a.name))
      continue;
    auto diag = t.emitOpError("argument '") << a.name << "' is missing (" << describe(a.type)
                                            << ")";
    if (a.stage == TaskArgStage::Partitioned)
      diag << "; run schedule-partition-work";
    return diag;
  }
  return success();
}

} // namespace mk::schedule
