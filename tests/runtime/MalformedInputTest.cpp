//===- MalformedInputTest.cpp - The manifest reader against bad input -----===//
//
// Table-driven: every case starts from the valid tiny manifest, breaks one
// thing, and expects a Manifest error whose message names what is wrong. The
// output Manifest must be left as it was (parseManifest writes it only on
// success).
//
//===----------------------------------------------------------------------===//

#include "FuzzMutator.h"
#include "TestKernels.h"
#include "mk/runtime/Manifest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace mk;
using namespace mk::rt;
using mk::testing::makeManifest;
using mk::testing::eraseMember;
using mk::testing::makeManifestValue;
using mk::testing::member;
using mk::testing::tinyConfig;

namespace {

json::Value &param(json::Value &m, const std::string &name,
                   const std::string &role) {
  for (json::Value &p : member(m, "params")->array)
    if (p.find("name") && p.find("name")->string == name &&
        p.find("role") && p.find("role")->string == role)
      return p;
  ADD_FAILURE() << "no param " << name << " (" << role << ")";
  static json::Value dummy = json::Value::makeObject();
  return dummy;
}

void eraseParam(json::Value &m, const std::string &name,
                const std::string &role) {
  auto &ps = member(m, "params")->array;
  for (auto it = ps.begin(); it != ps.end(); ++it)
    if (it->find("name")->string == name && it->find("role")->string == role) {
      ps.erase(it);
      return;
    }
  ADD_FAILURE() << "no param " << name << " (" << role << ")";
}

json::Value ints(std::initializer_list<int64_t> xs) {
  json::Value a = json::Value::makeArray();
  for (int64_t x : xs)
    a.push(json::Value::fromInt(x));
  return a;
}

/// A number with exactly this text (e.g. too large for int64).
json::Value rawNumber(const std::string &text) {
  json::Value v = json::Value::fromInt(0);
  v.numberText = text;
  return v;
}

json::Value str(const std::string &s) { return json::Value::fromString(s); }

json::Value capture(const std::string &name, json::Value shape,
                    int64_t offset) {
  json::Value c = json::Value::makeObject();
  c.set("name", str(name));
  c.set("dtype", str("bf16"));
  c.set("shape", std::move(shape));
  c.set("offset", json::Value::fromInt(offset));
  return c;
}

/// A debug-capture manifest with a 1024-byte arena.
json::Value debugManifest() {
  mk::testing::TestManifestOptions o;
  o.debugCapture = true;
  o.debugBytes = 1024;
  return makeManifestValue(tinyConfig(), o);
}

struct Case {
  const char *name;
  /// Either edits the valid manifest value, or (text != nullptr) replaces the
  /// whole manifest text.
  std::function<void(json::Value &)> edit;
  std::function<std::string(const std::string &)> text;
  const char *fragment;
  bool debug = false;
};

const std::string kW = "blocks.0.attn.o_proj.w_q";
const std::string kScales = "blocks.0.attn.o_proj.scales";
const std::string kNorm = "blocks.0.attn_norm";

std::vector<Case> cases() {
  using V = json::Value;
  std::vector<Case> c;
  auto edit = [&](const char *n, std::function<void(V &)> f, const char *frag,
                  bool debug = false) {
    c.push_back({n, std::move(f), nullptr, frag, debug});
  };
  auto text = [&](const char *n,
                  std::function<std::string(const std::string &)> f,
                  const char *frag) {
    c.push_back({n, nullptr, std::move(f), frag});
  };

  // --- Text that is not a JSON object.
  text("empty", [](const std::string &) { return std::string(); },
       "not valid JSON");
  text("truncated_half",
       [](const std::string &s) { return s.substr(0, s.size() / 2); },
       "not valid JSON");
  text("truncated_last_brace",
       [](const std::string &s) { return s.substr(0, s.size() - 1); },
       "not valid JSON");
  text("trailing_garbage", [](const std::string &s) { return s + " x"; },
       "not valid JSON");
  text("nul_and_binary",
       [](const std::string &) { return std::string("{\"a\"\0\xff", 6); },
       "not valid JSON");
  text("duplicate_top_key",
       [](const std::string &s) {
         return "{\"format\": \"x\", " + s.substr(s.find('{') + 1);
       },
       "not valid JSON");
  text("top_level_array", [](const std::string &) { return "[1, 2]"; },
       "must be a JSON object");
  text("top_level_string", [](const std::string &) { return "\"m\""; },
       "must be a JSON object");
  text("top_level_null", [](const std::string &) { return "null"; },
       "must be a JSON object");
  text("deep_nesting",
       [](const std::string &) {
         return std::string(100000, '[') + std::string(100000, ']');
       },
       "not valid JSON");

  // --- Top-level fields: missing, wrong type, out of range.
  edit("format_missing", [](V &m) { eraseMember(m, "format"); },
       "missing key 'format'");
  edit("format_int", [](V &m) { *member(m, "format") = V::fromInt(1); },
       "'format' must be a string");
  edit("format_unknown", [](V &m) { *member(m, "format") = str("mk-manifest-0"); },
       "unsupported format 'mk-manifest-0'");
  edit("kernel_empty", [](V &m) { *member(m, "kernel") = str(""); },
       "'kernel' must name");
  edit("kernel_array", [](V &m) { *member(m, "kernel") = V::makeArray(); },
       "'kernel' must be a string");
  edit("source_int", [](V &m) { *member(m, "source") = V::fromInt(3); },
       "'source' must be a string");
  edit("threads_missing", [](V &m) { eraseMember(m, "threads_per_block"); },
       "missing key 'threads_per_block'");
  edit("threads_string",
       [](V &m) { *member(m, "threads_per_block") = str("128"); },
       "'threads_per_block' must be an integer");
  edit("threads_fraction",
       [](V &m) { *member(m, "threads_per_block") = V::fromNumber(128.5); },
       "'threads_per_block' must be an integer");
  edit("threads_exponent",
       [](V &m) { *member(m, "threads_per_block") = rawNumber("1.28e2"); },
       "'threads_per_block' must be an integer");
  edit("threads_beyond_int64",
       [](V &m) {
         *member(m, "threads_per_block") = rawNumber("99999999999999999999");
       },
       "'threads_per_block' must be an integer");
  edit("threads_zero",
       [](V &m) { *member(m, "threads_per_block") = V::fromInt(0); },
       "threads_per_block must be in [1, 1024], got 0");
  edit("threads_negative",
       [](V &m) { *member(m, "threads_per_block") = V::fromInt(-128); },
       "'threads_per_block' must not be negative");
  edit("threads_too_many",
       [](V &m) { *member(m, "threads_per_block") = V::fromInt(1025); },
       "threads_per_block must be in [1, 1024], got 1025");
  edit("smem_missing", [](V &m) { eraseMember(m, "dynamic_shared_bytes"); },
       "missing key 'dynamic_shared_bytes'");
  edit("smem_negative",
       [](V &m) { *member(m, "dynamic_shared_bytes") = V::fromInt(-1); },
       "'dynamic_shared_bytes' must not be negative");
  edit("smem_bool",
       [](V &m) { *member(m, "dynamic_shared_bytes") = V::fromBool(true); },
       "'dynamic_shared_bytes' must be an integer");
  edit("workspace_string",
       [](V &m) { *member(m, "workspace_bytes") = str("big"); },
       "'workspace_bytes' must be an integer");
  edit("sync_null", [](V &m) { *member(m, "sync_bytes") = V::null(); },
       "'sync_bytes' must be an integer");
  edit("sync_missing", [](V &m) { eraseMember(m, "sync_bytes"); },
       "missing key 'sync_bytes'");
  edit("phases_string", [](V &m) { *member(m, "phases") = str("1"); },
       "'phases' must be an integer");
  edit("grid_barriers_negative",
       [](V &m) { *member(m, "grid_barriers") = V::fromInt(-1); },
       "'grid_barriers' must not be negative");
  edit("counters_object",
       [](V &m) { *member(m, "counters") = V::makeObject(); },
       "'counters' must be an integer");
  edit("max_blocks_negative",
       [](V &m) { m.set("max_blocks", V::fromInt(-4)); },
       "'max_blocks' must not be negative");
  edit("max_blocks_fraction",
       [](V &m) { m.set("max_blocks", V::fromNumber(1.5)); },
       "'max_blocks' must be an integer");
  edit("debug_capture_string",
       [](V &m) { *member(m, "debug_capture") = str("yes"); },
       "'debug_capture' must be true or false");

  // --- The configuration.
  edit("config_missing", [](V &m) { eraseMember(m, "config"); },
       "missing key 'config'");
  edit("config_array", [](V &m) { *member(m, "config") = V::makeArray(); },
       "'config' must be an object");
  edit("config_no_pattern",
       [](V &m) { eraseMember(*member(m, "config"), "pattern"); },
       "missing 'pattern'");
  edit("config_hidden_string",
       [](V &m) { *member(*member(m, "config"), "hidden") = str("256"); },
       "hidden");
  edit("config_hidden_negative",
       [](V &m) { *member(*member(m, "config"), "hidden") = V::fromInt(-256); },
       "hidden");
  edit("spec_not_object", [](V &m) { m.set("spec", V::fromInt(1)); },
       "spec:");
  edit("config_contradicts_params",
       [](V &m) { *member(*member(m, "config"), "hidden") = V::fromInt(512); },
       "param 'hidden_in' (input): shape [512] expected, manifest has [256]");
  edit("config_more_experts_than_params",
       [](V &m) { *member(*member(m, "config"), "n_experts") = V::fromInt(16); },
       "expected, manifest has");

  // --- The params array and each param's fields.
  edit("params_missing", [](V &m) { eraseMember(m, "params"); },
       "missing or non-array 'params'");
  edit("params_object", [](V &m) { *member(m, "params") = V::makeObject(); },
       "missing or non-array 'params'");
  edit("param_not_object",
       [](V &m) { member(m, "params")->array[3] = V::fromInt(7); },
       "each param must be an object");
  edit("param_name_missing",
       [](V &m) { eraseMember(param(m, kNorm, "weight"), "name"); },
       "missing key 'name'");
  edit("param_name_int",
       [](V &m) { *member(param(m, kNorm, "weight"), "name") = V::fromInt(0); },
       "'name' must be a string");
  edit("param_role_missing",
       [](V &m) { eraseMember(param(m, kNorm, "weight"), "role"); },
       "missing key 'role'");
  edit("param_role_unknown",
       [](V &m) { *member(param(m, kNorm, "weight"), "role") = str("bias"); },
       "param 'blocks.0.attn_norm': unknown role 'bias'");
  edit("param_dtype_missing",
       [](V &m) { eraseMember(param(m, kNorm, "weight"), "dtype"); },
       "missing key 'dtype'");
  edit("param_dtype_unknown",
       [](V &m) { *member(param(m, kNorm, "weight"), "dtype") = str("f16"); },
       "param 'blocks.0.attn_norm': unknown dtype 'f16'");
  edit("param_dtype_wrong",
       [](V &m) { *member(param(m, kNorm, "weight"), "dtype") = str("f32"); },
       "param 'blocks.0.attn_norm' (weight): dtype bf16 expected");
  edit("param_shape_missing",
       [](V &m) { eraseMember(param(m, kNorm, "weight"), "shape"); },
       "param 'blocks.0.attn_norm': missing 'shape'");
  edit("param_shape_string",
       [](V &m) { *member(param(m, kNorm, "weight"), "shape") = str("[256]"); },
       "'shape' must be an array");
  edit("param_shape_entry_string",
       [](V &m) {
         V s = V::makeArray();
         s.push(str("256"));
         *member(param(m, kNorm, "weight"), "shape") = s;
       },
       "shape entries must be integers >= -1");
  edit("param_shape_entry_fraction",
       [](V &m) {
         V s = V::makeArray();
         s.push(V::fromNumber(2.5));
         *member(param(m, kNorm, "weight"), "shape") = s;
       },
       "shape entries must be integers >= -1");
  edit("param_shape_negative",
       [](V &m) { *member(param(m, kNorm, "weight"), "shape") = ints({-256}); },
       "shape entries must be integers >= -1");
  edit("param_shape_huge",
       [](V &m) {
         *member(param(m, kNorm, "weight"), "shape") =
             ints({int64_t(1) << 62});
       },
       "param 'blocks.0.attn_norm' (weight): shape [256] expected");
  edit("param_shape_beyond_int64",
       [](V &m) {
         V s = V::makeArray();
         s.push(rawNumber("123456789012345678901234567890"));
         *member(param(m, kNorm, "weight"), "shape") = s;
       },
       "shape entries must be integers >= -1");
  edit("param_shape_zero_dims",
       [](V &m) { *member(param(m, kNorm, "weight"), "shape") = ints({}); },
       "shape [256] expected, manifest has []");
  edit("param_shape_zero_extent",
       [](V &m) { *member(param(m, kNorm, "weight"), "shape") = ints({0}); },
       "shape [256] expected, manifest has [0]");
  edit("param_shape_too_many_dims",
       [](V &m) {
         *member(param(m, kNorm, "weight"), "shape") = ints({256, 1, 1, 1, 1});
       },
       "shape [256] expected, manifest has [256, 1, 1, 1, 1]");
  edit("param_duplicate_name",
       [](V &m) {
         member(m, "params")->push(param(m, kNorm, "weight"));
       },
       "param 'blocks.0.attn_norm' appears twice with role weight");
  edit("param_two_inputs",
       [](V &m) {
         V p = param(m, "hidden_in", "input");
         *member(p, "name") = str("hidden_in2");
         member(m, "params")->push(p);
       },
       "expected exactly one param with role 'input', found 2");
  edit("param_no_output",
       [](V &m) { eraseParam(m, "hidden_out", "output"); },
       "expected exactly one param with role 'output', found 0");
  edit("param_unknown_weight",
       [](V &m) { *member(param(m, kNorm, "weight"), "name") = str("blocks.9.x"); },
       "param 'blocks.9.x' (weight) is not a parameter");
  edit("param_missing_weight",
       [](V &m) { eraseParam(m, kScales, "weight"); },
       "the manifest lacks weight 'blocks.0.attn.o_proj.scales'");
  edit("param_state_unknown",
       [](V &m) {
         *member(param(m, "state.1.S", "state_in"), "name") = str("state.1.T");
       },
       "param 'state.1.T' (state_in) is not a state tensor");
  edit("param_state_out_missing",
       [](V &m) { eraseParam(m, "state.1.S", "state_out"); },
       "the manifest lacks state_out 'state.1.S'");
  edit("scalar_with_shape",
       [](V &m) { *member(param(m, "ctx_len", "scalar"), "shape") = ints({1}); },
       "param 'ctx_len' (scalar): shape [] expected");
  edit("scalar_missing",
       [](V &m) { eraseParam(m, "cache_capacity", "scalar"); },
       "'cache_capacity' are required");
  edit("workspace_disagrees",
       [](V &m) { *member(m, "workspace_bytes") = V::fromInt(8192); },
       "param 'workspace' (workspace): shape [8192] expected");
  edit("sync_dtype",
       [](V &m) { *member(param(m, "sync", "sync"), "dtype") = str("i32"); },
       "param 'sync' (sync): dtype u8 expected");

  // --- tile and order.
  edit("tile_string",
       [](V &m) { param(m, kW, "weight").set("tile", str("128")); },
       "'tile' must be an integer");
  edit("tile_negative",
       [](V &m) { param(m, kW, "weight").set("tile", V::fromInt(-128)); },
       "'tile' must not be negative");
  edit("tile_not_dividing",
       [](V &m) { param(m, kW, "weight").set("tile", V::fromInt(48)); },
       "'tile' 48 needs a weight whose last dim it divides");
  edit("tile_huge",
       [](V &m) {
         param(m, kW, "weight").set("tile", V::fromInt(int64_t(1) << 62));
       },
       "needs a weight whose last dim it divides");
  edit("tile_on_1d_weight",
       [](V &m) { param(m, kNorm, "weight").set("tile", V::fromInt(16)); },
       "param 'blocks.0.attn_norm': 'tile' 16 needs a weight");
  edit("tile_on_state",
       [](V &m) { param(m, "state.1.S", "state_in").set("tile", V::fromInt(16)); },
       "param 'state.1.S': 'tile' 16 needs a weight");
  edit("order_int",
       [](V &m) { param(m, kW, "weight").set("order", V::fromInt(1)); },
       "'order' must be a string");
  edit("order_unknown",
       [](V &m) {
         param(m, kW, "weight").set("tile", V::fromInt(128));
         param(m, kW, "weight").set("order", str("nvfp4"));
       },
       "'order' \"nvfp4\" needs \"mma\" or \"int8\"");
  edit("order_without_tile",
       [](V &m) { param(m, kW, "weight").set("order", str("mma")); },
       "param 'blocks.0.attn.o_proj.w_q': 'order' \"mma\" needs");
  edit("order_on_non_int4",
       [](V &m) {
         param(m, kScales, "weight").set("tile", V::fromInt(128));
         param(m, kScales, "weight").set("order", str("mma"));
       },
       "an int4 weight");
  edit("order_on_1d",
       [](V &m) { param(m, kNorm, "weight").set("order", str("int8")); },
       "param 'blocks.0.attn_norm': 'order' \"int8\" needs");

  // --- The debug arena and captures.
  edit("debug_param_without_flag",
       [](V &m) { *member(m, "debug_capture") = V::fromBool(false); },
       "a 'debug' param but debug_capture is false", true);
  edit("debug_flag_without_param",
       [](V &m) { *member(m, "debug_capture") = V::fromBool(true); },
       "expected exactly one param with role 'debug', found 0");
  edit("debug_param_2d",
       [](V &m) {
         *member(param(m, "debug", "debug"), "shape") = ints({32, 32});
       },
       "param 'debug' (debug) must be u8 [bytes]", true);
  edit("debug_param_rows",
       [](V &m) { *member(param(m, "debug", "debug"), "shape") = ints({-1}); },
       "param 'debug' (debug) must be u8 [bytes]", true);
  edit("captures_object",
       [](V &m) { *member(m, "captures") = V::makeObject(); },
       "'captures' must be an array", true);
  edit("captures_without_debug",
       [](V &m) { member(m, "captures")->push(capture("q", ints({4}), 0)); },
       "captures listed but debug_capture is false");
  edit("capture_not_object",
       [](V &m) { member(m, "captures")->push(V::fromInt(3)); },
       "each capture must be an object", true);
  edit("capture_name_missing",
       [](V &m) {
         V c = capture("q", ints({4}), 0);
         eraseMember(c, "name");
         member(m, "captures")->push(c);
       },
       "missing key 'name'", true);
  edit("capture_dtype_unknown",
       [](V &m) {
         V c = capture("q", ints({4}), 0);
         *member(c, "dtype") = str("fp8");
         member(m, "captures")->push(c);
       },
       "capture 'q': unknown dtype 'fp8'", true);
  edit("capture_shape_missing",
       [](V &m) {
         V c = capture("q", ints({4}), 0);
         eraseMember(c, "shape");
         member(m, "captures")->push(c);
       },
       "capture 'q': missing shape", true);
  edit("capture_offset_negative",
       [](V &m) { member(m, "captures")->push(capture("q", ints({4}), -2)); },
       "'offset' must not be negative", true);
  edit("capture_twice",
       [](V &m) {
         member(m, "captures")->push(capture("q", ints({4}), 0));
         member(m, "captures")->push(capture("q", ints({4}), 8));
       },
       "capture 'q' appears twice", true);
  edit("capture_outside_arena",
       [](V &m) { member(m, "captures")->push(capture("q", ints({512}), 2)); },
       "capture 'q' [2, 1026) lies outside the debug arena of 1024 bytes",
       true);
  edit("capture_rows_shape",
       [](V &m) { member(m, "captures")->push(capture("q", ints({-1, 4}), 0)); },
       "capture 'q': shape entries must be positive", true);
  edit("capture_zero_shape",
       [](V &m) { member(m, "captures")->push(capture("q", ints({0}), 0)); },
       "capture 'q': shape entries must be positive", true);
  edit("capture_overflowing_shape",
       [](V &m) {
         member(m, "captures")->push(
             capture("q", ints({int64_t(1) << 40, int64_t(1) << 40}), 0));
       },
       "lies outside the debug arena", true);
  edit("capture_overflowing_offset",
       [](V &m) {
         member(m, "captures")->push(
             capture("q", ints({4}), INT64_MAX - 2));
       },
       "lies outside the debug arena", true);
  return c;
}

} // namespace

TEST(MalformedManifest, EveryCaseIsAnErrorNamingTheField) {
  const std::string valid = makeManifest(tinyConfig());
  // The starting points are valid.
  Manifest good;
  ASSERT_TRUE(parseManifest(valid, good).isOk());
  Manifest goodDebug;
  ASSERT_TRUE(parseManifest(json::write(debugManifest()), goodDebug).isOk());

  std::vector<Case> all = cases();
  EXPECT_GE(all.size(), 25u);
  for (const Case &c : all) {
    SCOPED_TRACE(c.name);
    std::string text;
    if (c.text) {
      text = c.text(valid);
    } else {
      json::Value v = c.debug ? debugManifest() : makeManifestValue(tinyConfig());
      c.edit(v);
      text = json::write(v);
    }
    // Parse into a Manifest that already holds a valid result: a failure
    // must leave it as it was.
    Manifest m = good;
    Status st = parseManifest(text, m);
    ASSERT_FALSE(st.isOk()) << c.name << ": accepted";
    EXPECT_EQ(st.code(), ErrorCode::Manifest) << c.name;
    EXPECT_NE(st.message().find(c.fragment), std::string::npos)
        << c.name << ": expected \"" << c.fragment << "\" in: "
        << st.message();
    EXPECT_EQ(m.kernel, good.kernel) << c.name;
    EXPECT_EQ(m.params.size(), good.params.size()) << c.name;
    EXPECT_EQ(m.threadsPerBlock, good.threadsPerBlock) << c.name;
    EXPECT_EQ(m.config.hidden, good.config.hidden) << c.name;
    EXPECT_TRUE(m.captures.empty()) << c.name;
  }
}

TEST(MalformedManifest, EveryPrefixOfAValidManifestIsRejected) {
  // Cutting the text anywhere must give an error, never a crash.
  const std::string valid = json::write(debugManifest());
  for (size_t n = 0; n < valid.size(); n += 7) {
    Manifest m;
    Status st = parseManifest(valid.substr(0, n), m);
    ASSERT_FALSE(st.isOk()) << "prefix of " << n << " bytes accepted";
    EXPECT_EQ(st.code(), ErrorCode::Manifest);
    EXPECT_NE(st.message().find("not valid JSON"), std::string::npos)
        << st.message();
  }
}

TEST(MalformedManifest, EveryMemberRemovedOrRetyped) {
  // Removing any top-level member, or replacing it with a value of another
  // type, gives an error or (optional members) a valid manifest; never a
  // crash. Required members must be reported by name.
  const json::Value base = makeManifestValue(tinyConfig());
  const std::vector<std::string> required = {
      "format", "kernel", "threads_per_block", "dynamic_shared_bytes",
      "workspace_bytes", "sync_bytes", "config", "params"};
  for (const auto &kv : base.object) {
    SCOPED_TRACE(kv.first);
    json::Value v = base;
    eraseMember(v, kv.first);
    Manifest m;
    Status st = parseManifest(json::write(v), m);
    bool isRequired = std::find(required.begin(), required.end(), kv.first) !=
                      required.end();
    EXPECT_EQ(st.isOk(), !isRequired) << st.toString();
    if (isRequired)
      EXPECT_NE(st.message().find(kv.first), std::string::npos)
          << st.message();
    for (const json::Value &other :
         {json::Value::null(), json::Value::fromBool(false),
          json::Value::fromInt(-1), json::Value::fromString("x"),
          json::Value::makeArray(), json::Value::makeObject()}) {
      if (other.kind == kv.second.kind)
        continue;
      json::Value w = base;
      *member(w, kv.first) = other;
      Manifest mw;
      Status sw = parseManifest(json::write(w), mw);
      EXPECT_FALSE(sw.isOk()) << kv.first << " as " << json::write(other);
      EXPECT_EQ(sw.code(), ErrorCode::Manifest);
    }
  }
}

TEST(MalformedManifest, SeededMutantsParseOrFailCleanly) {
  // Seeded mutants (tests/support/FuzzMutator.h: MK_FUZZ_SEED,
  // MK_FUZZ_ITERS) of a plain and a debug-capture manifest, pretty-printed
  // so that line swaps move whole members: each parses, or fails with a
  // Manifest error that says what is wrong and leaves the output as it was.
  const std::string plain = json::write(makeManifestValue(tinyConfig()), 1),
                    debug = json::write(debugManifest(), 1);
  std::mt19937_64 rng(mk::testing::seedOr(20261204));
  const int n = mk::testing::iterations(4000);
  int parsed = 0, refused = 0;
  for (int i = 0; i < n; ++i) {
    const bool d = rng() % 2;
    const std::string text = mk::testing::mutate(d ? debug : plain, d ? plain : debug, rng);
    Manifest m;
    m.kernel = "sentinel";
    const Status st = parseManifest(text, m);
    if (st.isOk()) {
      ++parsed;
      ASSERT_NE(m.kernel, "sentinel") << "mutant " << i << ": accepted but not written";
    } else {
      ++refused;
      ASSERT_EQ(st.code(), ErrorCode::Manifest) << "mutant " << i << ": " << st.toString();
      ASSERT_FALSE(st.message().empty()) << "mutant " << i;
      ASSERT_EQ(m.kernel, "sentinel") << "mutant " << i << ": the output changed on a failure";
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(refused, 0);
}
