//===- EmitterNvrtcTest.cpp - Emitted kernels compile with NVRTC ----------===//
//
// Runs mkc's pipeline to the "cuda" stage for the Kimi-Linear unit and the
// tiny spec, checks the manifest with the runtime's own parser, and compiles
// the kernel with NVRTC (no GPU needed) for sm_90 and sm_120 with the
// embedded templates: no error, no warning, no register spills in any
// template (a few bytes in the dispatching kernel body). Registers,
// spills and shared memory are printed from ptxas' verbose log.
//
// The --debug-capture kernels of both specs compile the same way (spills
// allowed there, only printed), and the debug manifest's captures are exactly
// the names the oracle's trace records for the spec, with the same sizes.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Driver.h"
#include "Pipeline/PipelineStages.h"

#include "mk/Oracle.h"

#include "mk/runtime/Manifest.h"

#include "NvrtcCheck.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cctype>

#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

namespace {

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Emitted {
  std::string source, manifest;
};

/// The unit's spec (examples/kimi_linear_w4a16.json) renamed `name`, with
/// the config values of `changes` (key, new value) in place of its own,
/// written to the test directory; its path, or "" (a failure) when a key
/// is not in the spec.
std::string unitSpecWith(const std::string &name,
                         const std::vector<std::pair<std::string, std::string>> &changes) {
  std::string text = slurp(std::string(MK_SOURCE_DIR) + "/examples/kimi_linear_w4a16.json");
  std::vector<std::pair<std::string, std::string>> all = {{"name", "\"" + name + "\""}};
  all.insert(all.end(), changes.begin(), changes.end());
  for (const auto &[key, value] : all) {
    const std::string k = "\"" + key + "\": ";
    const size_t at = text.find(k);
    if (at == std::string::npos) {
      ADD_FAILURE() << "no key " << key << " in the unit's spec";
      return "";
    }
    const size_t end = text.find_first_of(",\n}", at + k.size());
    text.replace(at + k.size(), end - at - k.size(), value);
  }
  const std::string path = std::string(MK_TEST_TMPDIR) + "/" + name + ".json";
  std::ofstream(path) << text;
  return path;
}

Emitted emit(const std::string &spec, const std::string &kernel,
             bool debugCapture = false, const std::string &passOption = "") {
  mk::DriverOptions o;
  o.inputPath = spec.front() == '/' ? spec : std::string(MK_SOURCE_DIR) + "/" + spec;
  o.emit = "cuda";
  o.debugCapture = debugCapture;
  // One directory per test and emission: tests that ctest runs at once
  // (each its own process) must not write and read each other's files,
  // though several emit the same kernel with the same options.
  std::string opt;
  for (char ch : passOption)
    opt += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  // Within a file name's length: a long one's head and a hash of the rest.
  if (opt.size() > 96)
    opt = opt.substr(0, 64) + "_" + std::to_string(std::hash<std::string>{}(passOption));
  // Specs of one kernel name (mk_tiny) get their own directories too.
  std::string stem = spec.substr(spec.find_last_of('/') + 1);
  stem = stem.substr(0, stem.find('.'));
  const ::testing::TestInfo *test = ::testing::UnitTest::GetInstance()->current_test_info();
  o.outputPath = std::string(MK_TEST_TMPDIR) + "/nvrtc-" + test->name() + "-" + stem + "-" +
                 kernel + (debugCapture ? "-debug" : "") + (opt.empty() ? "" : "-" + opt);
  // Several passes' options: separated by '|'.
  std::string optErr;
  for (llvm::StringRef rest = passOption; !rest.empty();) {
    auto [one, tail] = rest.split('|');
    EXPECT_TRUE(mk::addPassOption(one.str(), o.passOptions, optErr)) << optErr;
    rest = tail;
  }
  std::string out, err;
  llvm::raw_string_ostream os(out), es(err);
  EXPECT_EQ(mk::runDriver(o, os, es), 0) << es.str();
  return {slurp(o.outputPath + "/" + kernel + ".cu"),
          slurp(o.outputPath + "/" + kernel + ".manifest.json")};
}

/// `strict`: hold the kernel to the default kernels' spill rule even with a
/// pass option (one that selects a form the project keeps tested, e.g. the
/// argmax task's).
void check(const std::string &spec, const std::string &kernel, bool debugCapture = false,
           const std::string &passOption = "", int templateSpillBytes = 0, bool strict = false) {
  Emitted k = emit(spec, kernel, debugCapture, passOption);
  ASSERT_FALSE(k.source.empty());
  mk::rt::Manifest m;
  mk::rt::Status s = mk::rt::parseManifest(k.manifest, m);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(m.kernel, kernel);
  EXPECT_EQ(m.debugCapture, debugCapture);
  EXPECT_EQ(m.captures.empty(), !debugCapture);
  EXPECT_LT(m.gridBarriers, 14);
  std::printf("%s: %lld phases, %lld grid barriers, %lld counters, "
              "%lld B dynamic shared memory, %lld B workspace\n",
              kernel.c_str(), (long long)m.phases, (long long)m.gridBarriers,
              (long long)m.counters, (long long)m.dynamicSharedBytes,
              (long long)m.workspaceBytes);
  // Debug-capture kernels, and the opt-in variants, may spill (printed).
  const auto rule = !strict && (debugCapture || !passOption.empty())
                        ? mk::test::SpillRule::PrintOnly
                        : mk::test::SpillRule::Strict;
  for (const char *arch : {"sm_90", "sm_120"})
    mk::test::compileAndCheck(k.source, kernel, arch, rule, {}, nullptr, m.dynamicSharedBytes,
                              templateSpillBytes);
}

} // namespace

TEST(EmitterNvrtc, KimiLinear) {
  check("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16");
}

TEST(EmitterNvrtc, Tiny) { check("examples/specs/tiny.json", "mk_tiny"); }
// Groups of 16 rows: the 64-wide packed expert tiles (32-row steps) keep
// the exact tile under the scaled and folded arithmetics; both widths
// compile. Under the default (folded) this tiny kernel's outlined norm
// spills 8 B on sm_90 (ptxas; the scaled form none): compiled, not held to
// the no-spill rule (perf notes "Next (after session 27)").
TEST(EmitterNvrtc, SixteenRowGroups) {
  check("tests/lit/mkc/Inputs/tiny-group16.json", "mk_tiny", false,
        "schedule-tile-weights=arithmetic=scaled");
  Emitted k = emit("tests/lit/mkc/Inputs/tiny-group16.json", "mk_tiny", false, "");
  ASSERT_FALSE(k.source.empty());
  for (const char *arch : {"sm_90", "sm_120"})
    mk::test::compileAndCheck(k.source, "mk_tiny", arch, mk::test::SpillRule::PrintOnly);
}
// A dense SwiGLU FFN in front of the MoE layers (dense_layers), tiny and at
// the unit's width with a 9216-wide FFN (the released model's layer 0).
TEST(EmitterNvrtc, DenseFirstLayer) {
  check("examples/specs/tiny_dense_first.json", "mk_tiny_dense_first");
  check("examples/specs/kimi_linear_dense_first.json", "mk_kimi_linear_dense_first");
}

// The dense GQA family: a tiny two-layer spec, a Qwen3-8B-sized layer (fits
// sm_120's 99 KB) and its 36 layers (the body spills nothing at depth).
TEST(EmitterNvrtc, DenseGqa) {
  check("examples/specs/tiny_dense_gqa.json", "mk_tiny_dense_gqa");
  check("examples/specs/qwen3_8b_layer.json", "mk_qwen3_8b_layer");
  check("examples/specs/tiny_gqa_hybrid.json", "mk_tiny_gqa_hybrid");
  // 36 layers: two grid barriers per layer (after o_proj and after the
  // FFN's down), no spill in the body either.
  Emitted deep = emit("examples/specs/qwen3_8b_36l.json", "mk_qwen3_8b_36l");
  ASSERT_FALSE(deep.source.empty());
  mk::rt::Manifest m;
  ASSERT_TRUE(mk::rt::parseManifest(deep.manifest, m).isOk());
  EXPECT_EQ(m.gridBarriers, 72);
  for (const char *arch : {"sm_90", "sm_120"})
    mk::test::compileAndCheck(deep.source, "mk_qwen3_8b_36l", arch, mk::test::SpillRule::Strict,
                              {}, nullptr, m.dynamicSharedBytes);
  // The GQA attention's opt-in forms (gqa.cuh: lanes owning rows for the
  // scores, at most one attention task per block; perf notes #121, #124).
  Emitted layer = emit("examples/specs/qwen3_8b_layer.json", "mk_qwen3_8b_layer");
  for (const char *arch : {"sm_90", "sm_120"})
    mk::test::compileAndCheck(layer.source, "mk_qwen3_8b_layer", arch,
                              mk::test::SpillRule::TemplatesOnly,
                              {"-DMK_GQA_LANE_ROWS", "-DMK_GQA_TASK_PER_BLOCK"});
}

// The released model's sigmoid router (moe_topk_sigmoid).
TEST(EmitterNvrtc, SigmoidRouter) {
  check("examples/specs/tiny_sigmoid_router.json", "mk_tiny_sigmoid_router");
  check("examples/specs/kimi_linear_sigmoid_router.json", "mk_kimi_linear_sigmoid_router");
}

// The released model's MLA form (mla_rope_append_form: no rotation, the
// latent normalized).
TEST(EmitterNvrtc, MlaWithoutRotationLatentNormed) {
  check("examples/specs/tiny_mla_nope.json", "mk_tiny_mla_nope");
  check("examples/specs/kimi_linear_mla_nope.json", "mk_kimi_linear_mla_nope");
}

// Every released-model form at once (norms rounded twice among them).
TEST(EmitterNvrtc, ReleasedForms) {
  check("examples/specs/tiny_released_forms.json", "mk_tiny_released_forms");
  check("examples/specs/kimi_linear_released_forms.json", "mk_kimi_linear_released_forms");
}

// The released KDA's gated output norm staged by the output projection
// (schedule-fuse-kda-gated-norm=enabled=true, opt-in): no norm task is
// left, every projection stages the norm after its two prologue waits (the
// gate's producer and the gated delta: no counter wait of theirs before
// the task), and the kernel compiles for both targets.
TEST(EmitterNvrtc, ReleasedFormsGatedNormInTheProjection) {
  const std::string opt = "schedule-fuse-kda-gated-norm=enabled=true";
  check("examples/specs/kimi_linear_released_forms.json", "mk_kimi_linear_released_forms", false,
        opt);
  const std::string src = emit("examples/specs/kimi_linear_released_forms.json",
                               "mk_kimi_linear_released_forms", false, opt)
                              .source;
  EXPECT_EQ(src.find("kda_gated_norm_task"), std::string::npos);
  size_t calls = 0;
  for (size_t at = src.find("mk::w4a16_gemv_tile_gated_norm_staged_waiting<"); at != std::string::npos;
       at = src.find("mk::w4a16_gemv_tile_gated_norm_staged_waiting<", at + 1)) {
    const std::string line = src.substr(at, src.find('\n', at) - at);
    EXPECT_NE(line.find(", 128, mk::BothWaits<mk::CounterWaits, mk::CounterWaits>>>("),
              std::string::npos)
        << line;
    const size_t task = src.rfind("if (t < ", at);
    ASSERT_NE(task, std::string::npos);
    const std::string before = src.substr(task, at - task);
    // Before the task at most the wait for the sums' zeroing (target 1; in
    // layer 0, where no barrier orders it).
    size_t waits = 0;
    for (size_t w = before.find("mk::counter_wait("); w != std::string::npos;
         w = before.find("mk::counter_wait(", w + 1)) {
      ++waits;
      const std::string wline = before.substr(w, before.find('\n', w) - w);
      EXPECT_EQ(wline.substr(wline.size() - 6), ", 1u);") << wline;
    }
    EXPECT_LE(waits, 1u) << before;
    ++calls;
  }
  EXPECT_EQ(calls, 3u); // the three KDA layers' projections
}

// The greedy argmax merged by the LM head's tiles (schedule-fuse-argmax,
// the default): no argmax task is left, the LM head's one call site is
// followed by the tiles' argmax over all its tiles into the next token,
// and the kernels compile for both targets. (WholeModel below compiles the
// argmax task's form, enabled=false.)
TEST(EmitterNvrtc, WholeModelArgmaxInTheHeadTiles) {
  check("examples/specs/tiny_model.json", "mk_tiny_model");
  check("examples/specs/kimi_linear_model.json", "mk_kimi_linear_model");
  for (const char *spec : {"examples/specs/tiny_model.json", "examples/specs/kimi_linear_model.json"}) {
    const std::string src =
        emit(spec, std::string("mk_") + (std::string(spec).find("tiny") != std::string::npos
                                             ? "tiny_model"
                                             : "kimi_linear_model"))
            .source;
    EXPECT_EQ(src.find("mk::argmax_task<"), std::string::npos) << spec;
    const size_t at = src.find("mk::argmax_of_tile<");
    ASSERT_NE(at, std::string::npos) << spec;
    EXPECT_EQ(src.find("mk::argmax_of_tile<", at + 1), std::string::npos) << spec;
    const std::string line = src.substr(at, src.find('\n', at) - at);
    // Every LM-head tile merges once; the last of them (257 tiles of 32 of
    // the 8208 columns, 1280 of 128 of the 163840) writes the token.
    const bool tiny = std::string(spec).find("tiny") != std::string::npos;
    EXPECT_NE(line.find(tiny ? "(n0, nvalid, 257, " : "(n0, nvalid, 1280, "), std::string::npos)
        << line;
    EXPECT_NE(line.find(", next_token);"), std::string::npos) << line;
  }
}

// The whole model (token in, next token out): the tiny one and the unit's
// width with the released model's 163840-token LM head; the manifest names
// the token, the next token and where the logits are. In the argmax task's
// form (schedule-fuse-argmax=enabled=false; the default folds it,
// WholeModelArgmaxInTheHeadTiles above).
TEST(EmitterNvrtc, WholeModel) {
  const std::string opt = "schedule-fuse-argmax=enabled=false";
  check("examples/specs/tiny_model.json", "mk_tiny_model", false, opt, 0, /*strict=*/true);
  check("examples/specs/kimi_linear_model.json", "mk_kimi_linear_model", false, opt, 0,
        /*strict=*/true);
  Emitted k = emit("examples/specs/tiny_model.json", "mk_tiny_model", false, opt);
  mk::rt::Manifest m;
  ASSERT_TRUE(mk::rt::parseManifest(k.manifest, m).isOk());
  EXPECT_EQ(m.config.vocab, 8208);
  EXPECT_GE(m.findParam("token", mk::rt::ParamRole::Scalar), 0);
  EXPECT_GE(m.findParam("next_token", mk::rt::ParamRole::Output), 0);
  EXPECT_EQ(m.findParam("hidden_in", mk::rt::ParamRole::Input), -1);
  EXPECT_GE(m.logitsOffset, 0);
  EXPECT_NE(k.source.find("const int token, int *__restrict__ next_token"), std::string::npos);
  EXPECT_NE(k.source.find("mk::argmax_task<"), std::string::npos);
}

namespace {

/// The Kimi-Linear kernel with one pass option: compiled like the others
/// (spills allowed), and its manifest.
mk::rt::Manifest kimiLinearWith(const std::string &passOption) {
  check("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, passOption);
  mk::rt::Manifest m;
  mk::rt::Status s = mk::rt::parseManifest(
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, passOption).manifest,
      m);
  EXPECT_TRUE(s.isOk()) << s.message();
  return m;
}

const mk::rt::ManifestParam &weight(const mk::rt::Manifest &m, const std::string &name) {
  static const mk::rt::ManifestParam none;
  int i = m.findParam(name, mk::rt::ParamRole::Weight);
  EXPECT_GE(i, 0) << name;
  return i < 0 ? none : m.params[size_t(i)];
}

} // namespace

// Tile-contiguous weights (schedule-tile-weights=layout=tiled, opt-in): the
// manifest marks them, and the kernel compiles (on sm_90 its body spills 16
// bytes, printed; measured slower than the packed default, perf notes #25).
TEST(EmitterNvrtc, KimiLinearTiledWeights) {
  mk::rt::Manifest m = kimiLinearWith("schedule-tile-weights=layout=tiled");
  EXPECT_EQ(weight(m, "blocks.0.attn.q_proj.w_q").tile, 64);
  EXPECT_EQ(weight(m, "blocks.0.attn.q_proj.w_q").order, mk::PackedOrder::None);
  EXPECT_EQ(weight(m, "blocks.3.attn.kv_b.w_q").tile, 0)
      << "kv_b is also read by the absorbed attention";
}

// Packed 128- and 64-wide tiles (layout=packed, the default): with the
// tensor-core tile's arithmetics (folded, the default; exact; scaled) their
// w_q are marked order "mma", with arithmetic=int8 "int8"; every kernel
// compiles for sm_90 and sm_120.
TEST(EmitterNvrtc, KimiLinearPackedWeights) {
  for (auto [opt, order] :
       {std::pair{"schedule-tile-weights=layout=packed", mk::PackedOrder::Mma},
        std::pair{"schedule-tile-weights=arithmetic=exact", mk::PackedOrder::Mma},
        std::pair{"schedule-tile-weights=arithmetic=scaled", mk::PackedOrder::Mma},
        std::pair{"schedule-tile-weights=arithmetic=int8", mk::PackedOrder::Int8}}) {
    SCOPED_TRACE(opt);
    mk::rt::Manifest m = kimiLinearWith(opt);
    EXPECT_EQ(weight(m, "blocks.0.moe.gate.w_q").tile, 128);
    EXPECT_EQ(weight(m, "blocks.0.moe.gate.w_q").order, order);
    EXPECT_EQ(weight(m, "blocks.0.moe.gate.scales").order, mk::PackedOrder::None);
    EXPECT_EQ(weight(m, "blocks.0.attn.q_proj.w_q").tile, 64);
    EXPECT_EQ(weight(m, "blocks.0.attn.q_proj.w_q").order, order) << "64-wide full-K tiles pack too";
    EXPECT_EQ(weight(m, "blocks.3.attn.kv_b.w_q").tile, 0) << "kv_b is also read by attention";
  }
}

// The opt-in early requests of schedule-prefetch-weights (L2 requests for
// each block's first instance: GEMV tiles and bf16 rows in the norm phases,
// KDA state and conv parameters in the gated-delta phases; early streams in
// the phases without a norm; each block's routed down tile after its
// top-k): each kernel compiles under NVRTC for sm_90 and sm_120 (the next
// device run measures them, docs/perf-notes.md), and only routed-tasks-l2
// asks L2 for the routed down tiles' weights.
TEST(EmitterNvrtc, KimiLinearEarlyRequests) {
  for (const char *opt : {"schedule-prefetch-weights=l2-first-tasks=true",
                          "schedule-prefetch-weights=kda-state-l2=true",
                          "schedule-prefetch-weights=norm-free-streams=true",
                          "schedule-prefetch-weights=routed-tasks-l2=true"}) {
    SCOPED_TRACE(opt);
    mk::rt::Manifest m = kimiLinearWith(opt);
    EXPECT_EQ(weight(m, "blocks.0.attn.q_proj.w_q").tile, 64);
    const std::string src =
        emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, opt).source;
    EXPECT_EQ(src.find("mk::l2_prefetch_range(blocks_0_moe_down_w_q") != std::string::npos,
              std::string(opt).find("routed-tasks-l2") != std::string::npos);
  }
}

// The MLA attention chunks' wait for the absorbed queries in their prologue
// (schedule-prologue-waits attention, on by default): the task takes the
// waiting form and that wait, and its wait for the rope/append task stays
// before it (EmitterNvrtc.KimiLinear compiles this kernel for both targets).
TEST(EmitterNvrtc, KimiLinearAttentionPrologueWait) {
  const std::string src =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "").source;
  EXPECT_NE(src.find("mk::mla_attention_chunk_task_waiting<"), std::string::npos);
  const size_t call = src.find("mla_attention_chunk_task_waiting<");
  ASSERT_NE(call, std::string::npos);
  const std::string line = src.substr(call, src.find('\n', call) - call);
  const size_t cw = line.find("mk::CounterWaits{sync, ");
  ASSERT_NE(cw, std::string::npos) << line;
  const std::string base = line.substr(cw + 23, line.find(' ', cw + 23) - cw - 23);
  // Before the call: the task's one other wait (the rope/append task's),
  // not the prologue's counter again.
  const size_t task = src.rfind("// blocks.3.attn.attention", call);
  ASSERT_NE(task, std::string::npos);
  const std::string before = src.substr(task, call - task);
  size_t waits = 0;
  for (size_t p = before.find("mk::counter_wait("); p != std::string::npos;
       p = before.find("mk::counter_wait(", p + 1))
    ++waits;
  EXPECT_EQ(waits, 1u) << before;
  EXPECT_EQ(before.find("counter_wait(sync, " + base + " "), std::string::npos) << before;
  // An instance past the context's chunks runs no task but still waits
  // (two head groups of 16 per chunk).
  EXPECT_NE(before.find("if (i >= nch * 2) mk::CounterWaits{sync, " + base + " "),
            std::string::npos)
      << before;
  // attention=false keeps every attention wait before the task.
  const std::string plain = emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16",
                                 false, "schedule-prologue-waits=attention=false")
                                .source;
  EXPECT_EQ(plain.find("mla_attention_chunk_task_waiting"), std::string::npos);
  EXPECT_NE(plain.find("mk::mla_attention_chunk_task<"), std::string::npos);
}

// The output projections' waits for their inputs in the tile's prologue
// (schedule-prologue-waits gemv, on by default) and the MLA query
// absorption's (absorb=true, opt-in): the KDA and MLA o_proj tiles take the
// staged tile's waiting form, the absorption its own, and the kernel
// compiles for both targets without a template spill.
TEST(EmitterNvrtc, KimiLinearGemvPrologueWait) {
  const auto waitingTiles = [](const std::string &src) {
    size_t n = 0;
    for (size_t p = src.find("w4a16_gemv_tile_staged_waiting<"); p != std::string::npos;
         p = src.find("w4a16_gemv_tile_staged_waiting<", p + 1)) {
      ++n;
      const std::string line = src.substr(p, src.find('\n', p) - p);
      EXPECT_NE(line.find("mk::CounterWaits{sync"), std::string::npos) << line;
    }
    return n;
  };
  const std::string plain =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "").source;
  EXPECT_EQ(waitingTiles(plain), 4u) << "the three KDA o_proj and the MLA o_proj";
  EXPECT_EQ(plain.find("mla_q_absorb_task_waiting<"), std::string::npos);
  EXPECT_EQ(waitingTiles(emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false,
                              "schedule-prologue-waits=gemv=false")
                             .source),
            0u);
  const std::string opt = "schedule-prologue-waits=absorb=true";
  kimiLinearWith(opt);
  const std::string src =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, opt).source;
  EXPECT_EQ(waitingTiles(src), 4u);
  const size_t absorb = src.find("mk::mla_q_absorb_task_waiting<");
  ASSERT_NE(absorb, std::string::npos);
  EXPECT_NE(src.substr(absorb, src.find('\n', absorb) - absorb).find("mk::CounterWaits{sync"),
            std::string::npos);
  // The waiting forms under the templates' opt-in builds (timing stages,
  // the other attention forms, the serial staging). Under the sliced
  // attention the outlined norm spills 8 B on sm_90, as it does in the
  // default kernel with that option (and in the tiny 16-row-group kernel,
  // SixteenRowGroups): printed, not held. Under the SIMT attention it keeps
  // 8 B across its call since the routers' logits are polled (session 35):
  // held to kTemplateSpillAllowance.
  for (const char *option : {"-DMK_PHASE_TIMING", "-DMK_MLA_ATTENTION_SLICED",
                             "-DMK_MLA_ATTENTION_SIMT", "-DMK_SERIAL_STAGING"}) {
    SCOPED_TRACE(option);
    const std::string o = option;
    mk::test::compileAndCheck(src, "mk_kimi_linear_w4a16", "sm_90",
                              o == "-DMK_MLA_ATTENTION_SLICED" ? mk::test::SpillRule::PrintOnly
                                                               : mk::test::SpillRule::TemplatesOnly,
                              {option}, nullptr, -1,
                              o == "-DMK_MLA_ATTENTION_SIMT" ? mk::test::kTemplateSpillAllowance
                                                             : 0);
  }
}

// The block-wide MLA attention's opt-in forms: its probabilities formed in
// every warp (-DMK_MLA_WARP_SOFTMAX) and its rows moved by bulk copies
// (-DMK_MLA_BULK_ROWS). The unit's kernel compiles with each for both
// targets, no warning, no template spill, the body within bounds: the
// warp softmax with 8-head tasks (its only shape: the default's 16-head
// tasks ignore it), the bulk rows with the default's, and the default's
// 16-head one-part tasks with their query fragments in registers
// (-DMK_MLA_QUERY_REGS), their softmax stage on adjacent heads
// (-DMK_MLA_SOFTMAX_ADJACENT), every warp scoring all rows of a sub-chunk
// (-DMK_MLA_SCORE_ALL_ROWS).
TEST(EmitterNvrtc, MlaOptInForms) {
  const std::string src =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "").source;
  const std::string eight =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false,
           "schedule-partition-work=attention-head-group=8 attention-chunks=64")
          .source;
  ASSERT_NE(eight.find("mla_attention_chunk_task_waiting<256, 32, 8, 512, 64, 16, "),
            std::string::npos);
  const std::vector<std::vector<std::string>> forms = {
      {"-DMK_MLA_WARP_SOFTMAX"},
      {"-DMK_MLA_BULK_ROWS"},
      {"-DMK_MLA_QUERY_REGS"},
      {"-DMK_MLA_SOFTMAX_ADJACENT"},
      {"-DMK_MLA_SCORE_ALL_ROWS"}};
  for (const std::vector<std::string> &options : forms)
    for (const char *arch : {"sm_90", "sm_120"}) {
      std::string name;
      for (const std::string &o : options)
        name += o + " ";
      SCOPED_TRACE(name + arch);
      mk::test::compileAndCheck(options[0] == "-DMK_MLA_WARP_SOFTMAX" ? eight : src,
                                "mk_kimi_linear_w4a16", arch, mk::test::SpillRule::Strict,
                                options);
    }
}

// The MLA combine's wait for the attention chunks' partials in its
// prologue (schedule-prologue-waits combine=true, opt-in): the combine
// takes its waiting form and that wait (none left before it), its merge's
// scratch past the GEMV's ring fits the work area the other tasks already
// need (the same dynamic shared memory as the default), and the kernel
// compiles for both targets without a template spill.
TEST(EmitterNvrtc, KimiLinearCombinePrologueWait) {
  const std::string opt = "schedule-prologue-waits=combine=true";
  const mk::rt::Manifest waiting = kimiLinearWith(opt);
  mk::rt::Manifest plain;
  ASSERT_TRUE(mk::rt::parseManifest(
                  emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "")
                      .manifest,
                  plain)
                  .isOk());
  EXPECT_EQ(waiting.dynamicSharedBytes, plain.dynamicSharedBytes);
  const std::string src =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, opt).source;
  const size_t call = src.find("mk::mla_combine_wv_task_waiting<");
  ASSERT_NE(call, std::string::npos);
  const std::string line = src.substr(call, src.find('\n', call) - call);
  EXPECT_NE(line.find("mk::CounterWaits{sync"), std::string::npos) << line;
  const size_t task = src.rfind("// blocks.3.attn.combine_wv", call);
  ASSERT_NE(task, std::string::npos);
  EXPECT_EQ(src.substr(task, call - task).find("mk::counter_wait("), std::string::npos);
  EXPECT_EQ(emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "")
                .source.find("mla_combine_wv_task_waiting"),
            std::string::npos);
}

// The router's logits polled (schedule-poll-router-logits, on by default
// since session 35; the counted form is enabled=false): the routers store for polling, every routed expert task's top-k
// polls (the softmax and the sigmoid router), no routed task waits for a
// router counter, each layer's logits are cleared in the first phase, and
// the kernels compile for both targets.
TEST(EmitterNvrtc, RouterLogitsPolled) {
  const std::string opt = "schedule-poll-router-logits=enabled=true";
  struct Spec {
    const char *path, *kernel, *topk;
    size_t layers;
  };
  for (const Spec &sp : {Spec{"examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16",
                              "mk::moe_topk<64, 8, true>", 4},
                         Spec{"examples/specs/kimi_linear_released_forms.json",
                              "mk_kimi_linear_released_forms", "mk::moe_topk_sigmoid<64, 8, true>",
                              3}}) {
    check(sp.path, sp.kernel, false, opt);
    const std::string src = emit(sp.path, sp.kernel, false, opt).source;
    // The polls one value after another (-DMK_POLL_SERIAL, the form before
    // the batched polls) compile too.
    mk::test::compileAndCheck(src, sp.kernel, "sm_90", mk::test::SpillRule::PrintOnly,
                              {"-DMK_POLL_SERIAL"});
    auto count = [&](const std::string &what) {
      size_t n = 0;
      for (size_t at = src.find(what); at != std::string::npos; at = src.find(what, at + 1))
        ++n;
      return n;
    };
    EXPECT_EQ(count(sp.topk), 2 * sp.layers) << sp.path; // gate/up and down, per MoE layer
    EXPECT_EQ(count(", true>>(xs, blocks_"), sp.layers) << sp.path; // the routers' stores
    EXPECT_EQ(count(".moe.router.clear"), sp.layers) << sp.path;
    // Between a routed task's start and its top-k: a counter wait (the
    // router's) in the counted kernel, none when polled.
    auto waitsBeforeTopk = [](const std::string &text) {
      size_t waits = 0;
      for (const char *task : {".moe.experts.gate_up\n", ".moe.experts.down\n"})
        for (size_t at = text.find(task); at != std::string::npos; at = text.find(task, at + 1)) {
          const size_t topk = text.find("mk::moe_topk", at);
          if (text.substr(at, topk - at).find("mk::counter_wait(") != std::string::npos)
            ++waits;
        }
      return waits;
    };
    EXPECT_EQ(waitsBeforeTopk(src), 0u) << sp.path;
    EXPECT_EQ(emit(sp.path, sp.kernel, false, "").source, src) << sp.path; // the default
    const std::string plain =
        emit(sp.path, sp.kernel, false, "schedule-poll-router-logits=enabled=false").source;
    EXPECT_EQ(waitsBeforeTopk(plain), 2 * sp.layers) << sp.path;
    EXPECT_EQ(plain.find(", true>>(xs, blocks_"), std::string::npos) << sp.path;
  }
}

// MLA attention in groups of 16 heads in two parts (attention-query-parts=2:
// all 16 A rows of the mma are heads, hi and lo parts in two mma, a 2-slot
// ring) and, the default, in one (attention-query-parts=1: one mma per
// step, a 3-slot ring in the room of the lo query rows), and in groups of 8
// (hi and lo parts in one mma, 3 slots; the default before session 45): each
// kernel fits sm_120's 99 KB and compiles for both targets (perf notes #75,
// #214, #215 measured them; their template tests are Mla.SixteenHeadGroups,
// Mla.OnePartSixteenHeads and the Mla tests of 2-4 heads).
TEST(EmitterNvrtc, KimiLinearAttentionForms) {
  // The default: 16 heads, one part (PARTS 1), at least 32 rows a chunk.
  const std::string def =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "").source;
  // The head group (16) and the parts (1), then the argument list's end or
  // the partial sums' type, which is KimiLinearPartialsType's to check.
  const std::string call = "mla_attention_chunk_task_waiting<256, 32, 16, 512, 64, 16, "
                           "mk::CounterWaits, 1";
  const size_t at = def.find(call);
  ASSERT_NE(at, std::string::npos);
  ASSERT_LT(at + call.size(), def.size());
  EXPECT_TRUE(def[at + call.size()] == ',' || def[at + call.size()] == '>')
      << def.substr(at, call.size() + 16);
  EXPECT_NE(def.find("mk::mla_num_chunks(ctx_len + 1, gridDim.x, 128, 32)"), std::string::npos);
  // The forms before: two parts (the template's default, spelled because an
  // argument follows), and 8 heads.
  const struct {
    const char *option, *call, *chunks;
  } forms[] = {
      {"schedule-partition-work=attention-query-parts=2",
       "mla_attention_chunk_task_waiting<256, 32, 16, 512, 64, 16, mk::CounterWaits, 2, ",
       "mk::mla_num_chunks(ctx_len + 1, gridDim.x, 128, 32)"},
      {"schedule-partition-work=attention-head-group=8 attention-chunks=64 attention-chunk-rows=16",
       "mla_attention_chunk_task_waiting<256, 32, 8, 512, 64, 16, mk::CounterWaits, 2, ",
       "mk::mla_num_chunks(ctx_len + 1, gridDim.x, 64)"}};
  for (const auto &f : forms) {
    SCOPED_TRACE(f.option);
    const std::string src =
        emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, f.option).source;
    EXPECT_NE(src.find(f.call), std::string::npos);
    EXPECT_NE(src.find(f.chunks), std::string::npos);
    mk::rt::Manifest m = kimiLinearWith(f.option);
    EXPECT_GT(m.dynamicSharedBytes, 0); // within sm_120's limit with its statics: check()
  }
}

// The MLA partial sums' type (schedule-form-phases mla-partials): bf16 by
// default, where the attention's and the combine's trailing template
// argument matches the part_acc buffer's type, as the compile for both
// targets checks (the pointer is the buffer's), with the unit's schedule
// and with the attention's SUB and PARTS at the template's defaults
// (spelled before the type) and the combine's waiting form; f32 (the
// spec's) leaves the argument at its default.
TEST(EmitterNvrtc, KimiLinearPartialsType) {
  const std::string src =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, "").source;
  EXPECT_NE(src.find("mla_attention_chunk_task_waiting<256, 32, 16, 512, 64, 16, "
                     "mk::CounterWaits, 1, mk::bf16>>"),
            std::string::npos);
  EXPECT_NE(src.find("mla_combine_wv_task<256, 32, 128, 128, 512, 128, mk::bf16>>"),
            std::string::npos);
  const std::string f32 = "schedule-form-phases=mla-partials=f32";
  const std::string exact =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, f32).source;
  EXPECT_NE(exact.find("mla_attention_chunk_task_waiting<256, 32, 16, 512, 64, 16, "
                       "mk::CounterWaits, 1>>"),
            std::string::npos);
  EXPECT_NE(exact.find("mla_combine_wv_task<256, 32, 128, 128, 512, 128>>"), std::string::npos);
  EXPECT_EQ(exact.find("mk::bf16>>"), std::string::npos) << "f32 partials: the template default";
  check("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, f32);
  // The attention without its prologue wait, in 8-head tasks of two parts
  // (the template's defaults, spelled before the type), and the combine's
  // waiting form.
  const std::string other = "schedule-partition-work=attention-head-group=8 attention-chunks=64 "
                            "attention-query-parts=2 attention-chunk-rows=16"
                            "|schedule-prologue-waits=attention=false combine=true";
  const std::string src2 =
      emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, other).source;
  EXPECT_NE(src2.find("mla_attention_chunk_task<256, 32, 8, 512, 64, 16, 2, mk::bf16>>"),
            std::string::npos);
  EXPECT_NE(src2.find("mla_combine_wv_task_waiting<256, 32, 128, 128, 512, 128, "
                      "mk::CounterWaits, mk::bf16>>"),
            std::string::npos);
  check("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", false, other);
}

// 32-row attention sub-chunks (attention-sub-rows=32: two ring slots of 32
// rows): the kernel fits sm_120's 99 KB and compiles for both targets with
// no spill (its template test is Mla.ThirtyTwoRowSubChunks).
TEST(EmitterNvrtc, KimiLinearThirtyTwoRowAttention) {
  mk::rt::Manifest m =
      kimiLinearWith("schedule-partition-work=attention-head-group=8 attention-sub-rows=32");
  EXPECT_GT(m.dynamicSharedBytes, 0); // within sm_120's limit with its statics: check()
}

// The timing build mk-bench --phase-timing makes (-DMK_PHASE_TIMING: phase
// stamps, and the stage clocks inside the MLA attention and the packed
// GEMV tile) and the attention's earlier forms -DMK_MLA_SCORE_CHAIN and
// -DMK_MLA_QUERIES_TWO_TRIPS, and the router top-k's two-level rank count
// at the unit's 64 experts (-DMK_TOPK_TWO_LEVEL_ALL, whose candidates the
// emitter's static bound already counts: the kernel's static_assert) and
// the grouped tile's steps loading at 32-bit shared addresses
// (-DMK_GEMV_SHARED_LOADS) compile for both targets without a template
// spill. The timing build's module holds the
// globals mk-bench looks up by name, unmangled (a symbol of the cubin's
// string table between two NULs; one declared inside namespace mk would be
// _ZN2mk...E, which cuModuleGetGlobal does not find under the plain name).
TEST(EmitterNvrtc, KimiLinearTimingAndOptInBuilds) {
  Emitted k = emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16");
  const std::vector<std::vector<std::string>> builds = {
      {"-DMK_PHASE_TIMING"},
      {"-DMK_MLA_SCORE_CHAIN"},
      {"-DMK_MLA_QUERIES_TWO_TRIPS"},
      {"-DMK_TOPK_TWO_LEVEL_ALL"},
      {"-DMK_GEMV_SHARED_LOADS"}};
  for (const std::vector<std::string> &options : builds)
    for (const char *arch : {"sm_90", "sm_120"}) {
      SCOPED_TRACE(options.front());
      std::string cubin;
      mk::test::compileAndCheck(k.source, "mk_kimi_linear_w4a16", arch,
                                mk::test::SpillRule::TemplatesOnly, options, &cubin);
      if (options.front() != "-DMK_PHASE_TIMING")
        continue;
      for (const char *global : {"mk_phase_ns", "mk_phase_wait_ns", "mk_phase_done_ns",
                                 "mk_stage_cycles", "mk_stage_laps"}) {
        const std::string symbol = std::string(1, '\0') + global + std::string(1, '\0');
        EXPECT_NE(cubin.find(symbol), std::string::npos) << arch << ": no global " << global;
      }
    }
}

// DeepSeek-V3's width in the unit's family (hidden 7168, 128 MLA heads, 256
// experts 2048 wide): with the 2-stage ring it still needs the input
// vector (28 KB) beside the MLA attention's work area (77 KB); the phases
// that do not read the input vector lend its space to their tasks' work
// area, and the kernel fits sm_120's 99 KB. The phases that read it (the
// norms', the projections', the routed gate/up's) keep their own work area;
// the unit's kernel lends nothing.
TEST(EmitterNvrtc, DeepSeekWidthLendsTheInputVector) {
  const std::string spec = unitSpecWith("dsv3_width", {{"hidden", "7168"},
                                                       {"mla_heads", "128"},
                                                       {"n_experts", "256"},
                                                       {"moe_inter", "2048"}});
  ASSERT_FALSE(spec.empty());
  Emitted k = emit(spec, "mk_dsv3_width");
  ASSERT_FALSE(k.source.empty());
  EXPECT_NE(k.source.find("#define MK_W4A16_STAGES 2"), std::string::npos);
  // Two stages ahead (the default tile_stages_ahead) is the whole 2-stage ring.
  EXPECT_NE(k.source.find("#define MK_GEMV_AHEAD_STAGES 2"), std::string::npos);
  mk::rt::Manifest m;
  ASSERT_TRUE(mk::rt::parseManifest(k.manifest, m).isOk());
  // Which phases lend it: a phase's code starts after its "---- phase" line.
  auto lends = [&](const std::string &phase) {
    const size_t at = k.source.find("// ---- phase \"" + phase + "\"");
    EXPECT_NE(at, std::string::npos) << phase;
    const size_t next = k.source.find("// ---- phase", at + 1);
    return k.source.substr(at, next - at).find("float *const work = xs;") != std::string::npos;
  };
  EXPECT_TRUE(lends("blocks.3.attn.attention"));
  EXPECT_TRUE(lends("blocks.0.attn.gated_delta"));
  EXPECT_TRUE(lends("blocks.0.moe.experts.down"));
  EXPECT_FALSE(lends("blocks.0.attn_norm"));
  EXPECT_FALSE(lends("blocks.3.attn_norm"));
  EXPECT_FALSE(lends("blocks.0.moe_norm"));
  EXPECT_FALSE(lends("blocks.0.moe.experts.gate_up"));
  for (const char *arch : {"sm_90", "sm_120"})
    mk::test::compileAndCheck(k.source, "mk_dsv3_width", arch, mk::test::SpillRule::TemplatesOnly,
                              {}, nullptr, m.dynamicSharedBytes);
  Emitted unit = emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16");
  EXPECT_EQ(unit.source.find("float *const work = xs;"), std::string::npos);
}

// A spec too wide for the GEMV tiles' default 3-stage weight ring under
// sm_120's 99 KB gets a 2-stage ring (the source defines MK_W4A16_STAGES 2)
// and compiles for both targets; the unit keeps the default ring.
TEST(EmitterNvrtc, WideSpecTakesTheShallowRing) {
  const std::string spec = unitSpecWith("wide", {{"hidden", "4096"}, {"moe_inter", "2048"}});
  ASSERT_FALSE(spec.empty());
  Emitted k = emit(spec, "mk_wide");
  ASSERT_FALSE(k.source.empty());
  EXPECT_NE(k.source.find("#define MK_W4A16_STAGES 2"), std::string::npos);
  // Two stages ahead (the default tile_stages_ahead) is the whole 2-stage ring.
  EXPECT_NE(k.source.find("#define MK_GEMV_AHEAD_STAGES 2"), std::string::npos);
  mk::rt::Manifest m;
  ASSERT_TRUE(mk::rt::parseManifest(k.manifest, m).isOk());
  for (const char *arch : {"sm_90", "sm_120"})
    mk::test::compileAndCheck(k.source, "mk_wide", arch, mk::test::SpillRule::TemplatesOnly, {},
                              nullptr, m.dynamicSharedBytes);
  Emitted unit = emit("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16");
  EXPECT_EQ(unit.source.find("MK_W4A16_STAGES"), std::string::npos);
  // More stages ahead than the shallow ring has, or the whole ring (0), are
  // clamped to its 2 (the template's static_assert holds AHEAD <= STAGES).
  for (const char *ahead : {"3", "0"}) {
    Emitted more = emit(spec, "mk_wide", false,
                        std::string("schedule-prefetch-weights=tile-stages-ahead=") + ahead);
    EXPECT_NE(more.source.find("#define MK_GEMV_AHEAD_STAGES 2\n"), std::string::npos) << ahead;
  }
}

TEST(EmitterNvrtc, KimiLinearDebugCapture) {
  check("examples/kimi_linear_w4a16.json", "mk_kimi_linear_w4a16", true);
}

TEST(EmitterNvrtc, TinyDebugCapture) {
  check("examples/specs/tiny.json", "mk_tiny", true);
  // A dense-FFN layer captures the FFN's input and output (moe_in, moe_out)
  // and no router values.
  check("examples/specs/tiny_dense_first.json", "mk_tiny_dense_first", true);
  // The released forms: the FFNs' two sums rounded apart (ffn_rounding
  // "each") are captured as the residual reads them (debug_copy_sum).
  Emitted k = emit("examples/specs/tiny_released_forms.json", "mk_tiny_released_forms", true);
  EXPECT_NE(k.source.find("mk::debug_copy_sum("), std::string::npos);
  check("examples/specs/tiny_released_forms.json", "mk_tiny_released_forms", true);
}

// mk-diff compares captures with the oracle's trace by name: the debug
// manifest must name exactly what oracleStep records, with the same sizes.
TEST(EmitterDebugCapture, CapturesAreTheOracleTrace) {
  Emitted k = emit("examples/specs/tiny.json", "mk_tiny", true);
  mk::rt::Manifest m;
  mk::rt::Status s = mk::rt::parseManifest(k.manifest, m);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_TRUE(m.debugCapture);
  const mk::BlockConfig &cfg = m.config;
  mk::TensorMap weights = mk::makeRandomWeights(cfg, 1);
  mk::DecodeState state = mk::makeRandomState(cfg, 5, 2);
  std::vector<mk::BFloat16> hidden = mk::makeRandomHidden(cfg, 3);
  mk::OracleTrace trace;
  mk::oracleStep(cfg, weights, state, hidden, &trace);

  std::set<std::string> captured, traced;
  for (const mk::rt::Capture &c : m.captures) {
    captured.insert(c.name);
    auto it = trace.values.find(c.name);
    if (it == trace.values.end()) {
      ADD_FAILURE() << "capture '" << c.name << "' is not in the oracle trace";
      continue;
    }
    EXPECT_EQ(c.numel(), (int64_t)it->second.size()) << c.name;
    EXPECT_EQ(c.offset % 16, 0) << c.name;
  }
  for (const auto &kv : trace.values)
    traced.insert(kv.first);
  EXPECT_EQ(captured, traced);
  EXPECT_EQ(captured.size(), m.captures.size()) << "a capture appears twice";
  // Captures never overlap.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const mk::rt::Capture &c : m.captures)
    spans.push_back({c.offset, c.offset + c.bytes()});
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    EXPECT_LE(spans[i - 1].second, spans[i].first);
}

// The manifest lists a layer's captures in dataflow order, so that the first
// one mk-diff flags is the first phase that went wrong: the released KDA
// form's `gate` right after `beta_logits`, before the convolutions and the
// layer's output (it was once ranked after `out`).
TEST(EmitterDebugCapture, CapturesInDataflowOrder) {
  auto order = [](const char *spec, const char *kernel) {
    Emitted k = emit(spec, kernel, true);
    mk::rt::Manifest m;
    mk::rt::Status s = mk::rt::parseManifest(k.manifest, m);
    EXPECT_TRUE(s.isOk()) << s.message();
    std::vector<std::string> layer0;
    for (const mk::rt::Capture &c : m.captures)
      if (c.name.rfind("layer0.", 0) == 0)
        layer0.push_back(c.name.substr(7));
    return layer0;
  };
  auto before = [](const std::vector<std::string> &v, const char *a, const char *b) {
    auto ia = std::find(v.begin(), v.end(), a), ib = std::find(v.begin(), v.end(), b);
    EXPECT_NE(ia, v.end()) << a;
    EXPECT_NE(ib, v.end()) << b;
    return ia < ib;
  };
  const std::vector<std::string> kda =
      order("examples/specs/tiny_released_forms.json", "mk_tiny_released_forms");
  EXPECT_TRUE(before(kda, "beta_logits", "gate"));
  EXPECT_TRUE(before(kda, "gate", "q_conv"));
  EXPECT_TRUE(before(kda, "gate", "attn_out"));
}
