//===- Manifest.cpp - Reading and checking kernel manifests ---------------===//

#include "mk/runtime/Manifest.h"

#include "mk/BlockSpec.h"
#include "mk/Json.h"
#include "mk/PackedLayout.h"

#include <map>
#include <set>
#include <sstream>

namespace mk {
namespace rt {

const char *paramRoleName(ParamRole r) {
  switch (r) {
  case ParamRole::Input: return "input";
  case ParamRole::Output: return "output";
  case ParamRole::Weight: return "weight";
  case ParamRole::StateIn: return "state_in";
  case ParamRole::StateOut: return "state_out";
  case ParamRole::Scalar: return "scalar";
  case ParamRole::Workspace: return "workspace";
  case ParamRole::Sync: return "sync";
  case ParamRole::Debug: return "debug";
  }
  return "?";
}

bool parseParamRole(const std::string &s, ParamRole &out) {
  static const std::pair<const char *, ParamRole> roles[] = {
      {"input", ParamRole::Input},         {"output", ParamRole::Output},
      {"weight", ParamRole::Weight},       {"state_in", ParamRole::StateIn},
      {"state_out", ParamRole::StateOut},  {"scalar", ParamRole::Scalar},
      {"workspace", ParamRole::Workspace}, {"sync", ParamRole::Sync},
      {"debug", ParamRole::Debug}};
  for (const auto &r : roles)
    if (s == r.first) {
      out = r.second;
      return true;
    }
  return false;
}

int64_t Capture::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int Manifest::findParam(const std::string &name, ParamRole role) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].role == role && params[i].name == name)
      return int(i);
  return -1;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      os << ", ";
    if (shape[i] < 0)
      os << "rows";
    else
      os << shape[i];
  }
  os << "]";
  return os.str();
}

namespace {

Status bad(const std::string &msg) {
  return makeError(ErrorCode::Manifest, msg);
}

Status getIntField(const json::Value &obj, const char *key, bool required,
                   int64_t &out) {
  const json::Value *v = obj.find(key);
  if (!v) {
    if (required)
      return bad(std::string("missing key '") + key + "'");
    return Status::ok();
  }
  if (!v->getInt(out))
    return bad(v->where() + ": '" + key + "' must be an integer");
  if (out < 0)
    return bad(v->where() + ": '" + key + "' must not be negative");
  return Status::ok();
}

Status getStringField(const json::Value &obj, const char *key, bool required,
                      std::string &out) {
  const json::Value *v = obj.find(key);
  if (!v) {
    if (required)
      return bad(std::string("missing key '") + key + "'");
    return Status::ok();
  }
  if (!v->isString())
    return bad(v->where() + ": '" + key + "' must be a string");
  out = v->string;
  return Status::ok();
}

Status parseShape(const json::Value &v, const std::string &what,
                  std::vector<int64_t> &shape) {
  if (!v.isArray())
    return bad(v.where() + ": " + what + ": 'shape' must be an array");
  shape.clear();
  for (const json::Value &d : v.array) {
    int64_t n;
    if (!d.getInt(n) || n < -1)
      return bad(d.where() + ": " + what +
                 ": shape entries must be integers >= -1");
    shape.push_back(n);
  }
  return Status::ok();
}

/// The block spec the manifest embeds. Accepted forms, most explicit first:
/// a full spec under "spec"; a full spec under "config" (it has its own
/// "config" member); or the flat spec keys under "config" with "pattern"
/// (and optionally "name") inside it or at the manifest's top level.
Status readConfig(const json::Value &root, const std::string &kernel,
                  BlockConfig &cfg) {
  std::string err;
  if (const json::Value *spec = root.find("spec")) {
    if (!blockConfigFromJson(*spec, cfg, err))
      return bad("spec: " + err);
    return Status::ok();
  }
  const json::Value *conf = root.find("config");
  if (!conf)
    return bad("missing key 'config'");
  if (!conf->isObject())
    return bad(conf->where() + ": 'config' must be an object");
  if (conf->find("config")) {
    if (!blockConfigFromJson(*conf, cfg, err))
      return bad("config: " + err);
    return Status::ok();
  }
  json::Value spec = json::Value::makeObject();
  json::Value flat = json::Value::makeObject();
  const json::Value *pattern = root.find("pattern");
  const json::Value *name = nullptr;
  for (const auto &kv : conf->object) {
    if (kv.first == "pattern")
      pattern = &kv.second;
    else if (kv.first == "name")
      name = &kv.second;
    else
      flat.set(kv.first, kv.second);
  }
  if (!pattern)
    return bad("config: missing 'pattern' (inside 'config' or at top level)");
  spec.set("name", name ? *name : json::Value::fromString(kernel));
  spec.set("config", std::move(flat));
  spec.set("pattern", *pattern);
  if (!blockConfigFromJson(spec, cfg, err))
    return bad("config: " + err);
  return Status::ok();
}

} // namespace

Status parseManifest(const std::string &text, Manifest &out) {
  json::Value root;
  std::string err;
  if (!json::parse(text, root, err))
    return bad("not valid JSON: " + err);
  if (!root.isObject())
    return bad("the manifest must be a JSON object");

  Manifest m;
  MK_RETURN_IF_ERROR(getStringField(root, "format", true, m.format));
  if (m.format != "mk-manifest-1")
    return bad("unsupported format '" + m.format +
               "' (this runtime reads mk-manifest-1)");
  MK_RETURN_IF_ERROR(getStringField(root, "kernel", true, m.kernel));
  if (m.kernel.empty())
    return bad("'kernel' must name the kernel function");
  MK_RETURN_IF_ERROR(getStringField(root, "source", false, m.source));
  MK_RETURN_IF_ERROR(
      getIntField(root, "threads_per_block", true, m.threadsPerBlock));
  if (m.threadsPerBlock < 1 || m.threadsPerBlock > 1024)
    return bad("threads_per_block must be in [1, 1024], got " +
               std::to_string(m.threadsPerBlock));
  MK_RETURN_IF_ERROR(
      getIntField(root, "dynamic_shared_bytes", true, m.dynamicSharedBytes));
  MK_RETURN_IF_ERROR(
      getIntField(root, "workspace_bytes", true, m.workspaceBytes));
  MK_RETURN_IF_ERROR(getIntField(root, "sync_bytes", true, m.syncBytes));
  MK_RETURN_IF_ERROR(getIntField(root, "phases", false, m.phases));
  MK_RETURN_IF_ERROR(getIntField(root, "grid_barriers", false, m.gridBarriers));
  MK_RETURN_IF_ERROR(getIntField(root, "counters", false, m.counters));
  MK_RETURN_IF_ERROR(getIntField(root, "max_blocks", false, m.maxBlocks));
  if (const json::Value *d = root.find("debug_capture")) {
    if (!d->isBool())
      return bad(d->where() + ": 'debug_capture' must be true or false");
    m.debugCapture = d->boolean;
  }
  MK_RETURN_IF_ERROR(getStringField(root, "packed_arithmetic", false, m.packedArithmetic));
  if (m.packedArithmetic != "exact" && m.packedArithmetic != "scaled" &&
      m.packedArithmetic != "folded")
    return bad("'packed_arithmetic' must be \"exact\", \"scaled\" or \"folded\", got '" +
               m.packedArithmetic + "'");
  MK_RETURN_IF_ERROR(readConfig(root, m.kernel, m.config));

  const json::Value *params = root.find("params");
  if (!params || !params->isArray())
    return bad("missing or non-array 'params'");
  for (const json::Value &p : params->array) {
    if (!p.isObject())
      return bad(p.where() + ": each param must be an object");
    ManifestParam mp;
    MK_RETURN_IF_ERROR(getStringField(p, "name", true, mp.name));
    std::string what = "param '" + mp.name + "'";
    std::string role, dtype;
    MK_RETURN_IF_ERROR(getStringField(p, "role", true, role));
    if (!parseParamRole(role, mp.role))
      return bad(p.where() + ": " + what + ": unknown role '" + role + "'");
    MK_RETURN_IF_ERROR(getStringField(p, "dtype", true, dtype));
    if (!parseDType(dtype, mp.dtype))
      return bad(p.where() + ": " + what + ": unknown dtype '" + dtype + "'");
    const json::Value *shape = p.find("shape");
    if (!shape)
      return bad(p.where() + ": " + what + ": missing 'shape'");
    MK_RETURN_IF_ERROR(parseShape(*shape, what, mp.shape));
    MK_RETURN_IF_ERROR(getIntField(p, "tile", false, mp.tile));
    if (mp.tile != 0 &&
        (mp.role != ParamRole::Weight || mp.tile < 0 || mp.shape.size() < 2 ||
         mp.shape.back() % mp.tile != 0))
      return bad(p.where() + ": " + what + ": 'tile' " + std::to_string(mp.tile) +
                 " needs a weight whose last dim it divides");
    std::string order;
    MK_RETURN_IF_ERROR(getStringField(p, "order", false, order));
    if (!order.empty()) {
      const PackedOrder po = order == "mma"    ? PackedOrder::Mma
                             : order == "int8" ? PackedOrder::Int8
                                               : PackedOrder::None;
      // w_q rows are row pairs: half the weight rows of a step.
      const int64_t pairs = stepRows(po, mp.tile) / 2;
      if (po == PackedOrder::None || !pairs || mp.dtype != DType::U8 ||
          mp.shape[mp.shape.size() - 2] % pairs != 0)
        return bad(p.where() + ": " + what + ": 'order' \"" + order +
                   "\" needs \"mma\" or \"int8\" and an int4 weight with 'tile' 128 or 64 "
                   "whose rows are whole steps (mma: 8 row pairs at 128 wide, 16 at 64; "
                   "int8: 16)");
      mp.order = po;
    }
    m.params.push_back(std::move(mp));
  }

  // Role-by-role consistency with the configuration.
  const BlockConfig &cfg = m.config;
  std::map<ParamRole, int> roleCount;
  std::set<std::pair<int, std::string>> seen;
  for (const ManifestParam &p : m.params) {
    ++roleCount[p.role];
    if (!seen.insert({int(p.role), p.name}).second)
      return bad("param '" + p.name + "' appears twice with role " +
                 paramRoleName(p.role));
  }
  auto expectOne = [&](ParamRole r) -> Status {
    if (roleCount[r] != 1)
      return bad(std::string("expected exactly one param with role '") +
                 paramRoleName(r) + "', found " +
                 std::to_string(roleCount[r]));
    return Status::ok();
  };
  // A block's hidden in; the whole model's input is its scalar 'token'.
  if (cfg.vocab > 0 && roleCount[ParamRole::Input] != 0)
    return bad("a whole model (config 'vocab') takes its token id as the scalar 'token', not "
               "an input param");
  if (cfg.vocab == 0)
    MK_RETURN_IF_ERROR(expectOne(ParamRole::Input));
  MK_RETURN_IF_ERROR(expectOne(ParamRole::Output));
  MK_RETURN_IF_ERROR(expectOne(ParamRole::Workspace));
  MK_RETURN_IF_ERROR(expectOne(ParamRole::Sync));
  if (m.debugCapture)
    MK_RETURN_IF_ERROR(expectOne(ParamRole::Debug));
  else if (roleCount[ParamRole::Debug] != 0)
    return bad("a 'debug' param but debug_capture is false");

  auto checkDesc = [&](const ManifestParam &p, DType dt,
                       const std::vector<int64_t> &shape) -> Status {
    if (p.dtype != dt)
      return bad("param '" + p.name + "' (" + paramRoleName(p.role) +
                 "): dtype " + dtypeName(dt) + " expected, manifest has " +
                 dtypeName(p.dtype));
    if (p.shape != shape)
      return bad("param '" + p.name + "' (" + paramRoleName(p.role) +
                 "): shape " + formatShape(shape) +
                 " expected, manifest has " + formatShape(p.shape));
    return Status::ok();
  };

  std::map<std::string, TensorDesc> weights, state;
  for (TensorDesc &t : parameterTensors(cfg))
    weights[t.name] = t;
  for (TensorDesc &t : stateTensors(cfg, -1))
    state[t.name] = t;

  bool haveCtx = false, haveCap = false, haveToken = false;
  for (const ManifestParam &p : m.params) {
    switch (p.role) {
    case ParamRole::Input: // none in a whole model (checked above)
      MK_RETURN_IF_ERROR(checkDesc(p, DType::BF16, {cfg.hidden}));
      break;
    case ParamRole::Output:
      // A block's hidden out, or the whole model's next token.
      MK_RETURN_IF_ERROR(cfg.vocab > 0 ? checkDesc(p, DType::I32, {1})
                                       : checkDesc(p, DType::BF16, {cfg.hidden}));
      break;
    case ParamRole::Weight: {
      auto it = weights.find(p.name);
      if (it == weights.end())
        return bad("param '" + p.name +
                   "' (weight) is not a parameter of the configuration");
      MK_RETURN_IF_ERROR(checkDesc(p, it->second.dtype, it->second.shape));
      break;
    }
    case ParamRole::StateIn:
    case ParamRole::StateOut: {
      auto it = state.find(p.name);
      if (it == state.end())
        return bad("param '" + p.name + "' (" + paramRoleName(p.role) +
                   ") is not a state tensor of the configuration");
      MK_RETURN_IF_ERROR(checkDesc(p, it->second.dtype, it->second.shape));
      break;
    }
    case ParamRole::Scalar:
      if (p.name == "ctx_len")
        haveCtx = true;
      else if (p.name == "cache_capacity")
        haveCap = true;
      else if (p.name == "token" && cfg.vocab > 0)
        haveToken = true;
      else
        return bad("unknown scalar param '" + p.name +
                   "' (the runtime knows ctx_len, cache_capacity and, for a whole model, "
                   "token)");
      MK_RETURN_IF_ERROR(checkDesc(p, DType::I32, {}));
      break;
    case ParamRole::Workspace:
      MK_RETURN_IF_ERROR(checkDesc(p, DType::U8, {m.workspaceBytes}));
      break;
    case ParamRole::Sync:
      MK_RETURN_IF_ERROR(checkDesc(p, DType::U8, {m.syncBytes}));
      break;
    case ParamRole::Debug:
      if (p.shape.size() != 1 || p.shape[0] < 0 || p.dtype != DType::U8)
        return bad("param '" + p.name + "' (debug) must be u8 [bytes]");
      m.debugBytes = p.shape[0];
      break;
    }
  }
  if (!haveCtx || !haveCap)
    return bad("scalar params 'ctx_len' and 'cache_capacity' are required");
  if (cfg.vocab > 0) {
    // The whole model: the token in, the next token out, the logits' place.
    if (!haveToken || m.findParam("next_token", ParamRole::Output) < 0)
      return bad("a whole model (config 'vocab') needs the scalar param 'token' and the "
                 "output 'next_token'");
    const json::Value *l = root.find("logits");
    const json::Value *off = l && l->isObject() ? l->find("offset") : nullptr;
    const json::Value *cnt = l && l->isObject() ? l->find("count") : nullptr;
    int64_t o = -1, c = -1;
    if (!off || !cnt || !off->getInt(o) || !cnt->getInt(c))
      return bad("a whole model (config 'vocab') needs 'logits': {\"offset\", \"count\"} "
                 "(integers)");
    if (c != cfg.vocab || o < 0 || o % 2 || o + 2 * c > m.workspaceBytes)
      return bad("'logits' (offset " + std::to_string(o) + ", count " + std::to_string(c) +
                 ") must be the vocabulary's " + std::to_string(cfg.vocab) +
                 " bf16 values inside the workspace (" + std::to_string(m.workspaceBytes) +
                 " bytes)");
    m.logitsOffset = o;
  }
  for (const auto &kv : weights)
    if (m.findParam(kv.first, ParamRole::Weight) < 0)
      return bad("the manifest lacks weight '" + kv.first + "'");
  for (const auto &kv : state) {
    if (m.findParam(kv.first, ParamRole::StateIn) < 0)
      return bad("the manifest lacks state_in '" + kv.first + "'");
    if (m.findParam(kv.first, ParamRole::StateOut) < 0)
      return bad("the manifest lacks state_out '" + kv.first + "'");
  }

  if (const json::Value *caps = root.find("captures")) {
    if (!caps->isArray())
      return bad(caps->where() + ": 'captures' must be an array");
    std::set<std::string> names;
    for (const json::Value &c : caps->array) {
      if (!c.isObject())
        return bad(c.where() + ": each capture must be an object");
      Capture cap;
      MK_RETURN_IF_ERROR(getStringField(c, "name", true, cap.name));
      std::string dtype;
      MK_RETURN_IF_ERROR(getStringField(c, "dtype", true, dtype));
      if (!parseDType(dtype, cap.dtype))
        return bad(c.where() + ": capture '" + cap.name + "': unknown dtype '" +
                   dtype + "'");
      const json::Value *shape = c.find("shape");
      if (!shape)
        return bad(c.where() + ": capture '" + cap.name + "': missing shape");
      MK_RETURN_IF_ERROR(parseShape(*shape, "capture '" + cap.name + "'",
                                    cap.shape));
      // A capture is a fixed-size slice of the arena: no "rows" (-1) or
      // empty dims, and its size is computed without overflow.
      for (int64_t d : cap.shape)
        if (d < 1)
          return bad(shape->where() + ": capture '" + cap.name +
                     "': shape entries must be positive, got " +
                     formatShape(cap.shape));
      MK_RETURN_IF_ERROR(getIntField(c, "offset", true, cap.offset));
      if (!names.insert(cap.name).second)
        return bad("capture '" + cap.name + "' appears twice");
      if (!m.debugCapture)
        return bad("captures listed but debug_capture is false");
      // offset + bytes within the arena, computed without overflow.
      int64_t bytes = dtypeBytes(cap.dtype), end = 0;
      bool overflow = false;
      for (int64_t d : cap.shape)
        overflow = overflow || __builtin_mul_overflow(bytes, d, &bytes);
      overflow = overflow || __builtin_add_overflow(cap.offset, bytes, &end);
      if (overflow || end > m.debugBytes)
        return bad("capture '" + cap.name + "' " +
                   (overflow ? formatShape(cap.shape) + " at offset " +
                                   std::to_string(cap.offset)
                             : "[" + std::to_string(cap.offset) + ", " +
                                   std::to_string(end) + ")") +
                   " lies outside the debug arena of " +
                   std::to_string(m.debugBytes) + " bytes");
      m.captures.push_back(std::move(cap));
    }
  }
  out = std::move(m);
  return Status::ok();
}

} // namespace rt
} // namespace mk
