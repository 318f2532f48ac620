//===- mk-oracle.cpp - Command-line front end of the CPU oracle -----------===//
//
//   mk-oracle write-weights SPEC.json OUT.safetensors [--seed N]
//   mk-oracle write-inputs  SPEC.json OUT.safetensors [--ctx L]
//                           [--state-seed S] [--hidden-seed H]
//   mk-oracle run SPEC.json [--weights FILE | --seed N]
//                 [--inputs FILE | --ctx L --state-seed S --hidden-seed H]
//                 [--steps N] [--dump FILE] [--trace]
//   mk-oracle dense-step CONFIG.json OUT.safetensors [--seed N] [--ctx L]
//                        [--state-seed S] [--hidden-seed H]
//   mk-oracle kimi48b-step CONFIG.json OUT.safetensors [--seed N] [--ctx L]
//                          [--token T]
//
// docs/oracle.md describes every command and option.
//
//===----------------------------------------------------------------------===//

#include "mk/BlockSpec.h"
#include "mk/DenseGqaOracle.h"
#include "mk/HfCheckpoint.h"
#include "mk/Kimi48bOracle.h"
#include "mk/Oracle.h"
#include "mk/Safetensors.h"
#include "mk/TestData.h"
#include "mk/TextFile.h"

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace mk;

namespace {

const char *kUsage =
    "usage:\n"
    "  mk-oracle write-weights SPEC.json OUT.safetensors [--seed N]\n"
    "  mk-oracle write-inputs SPEC.json OUT.safetensors [--ctx L] "
    "[--state-seed S] [--hidden-seed H]\n"
    "  mk-oracle run SPEC.json [--weights FILE | --seed N]\n"
    "                [--inputs FILE | --ctx L --state-seed S --hidden-seed H]\n"
    "                [--steps N] [--dump FILE] [--trace]\n"
    "  mk-oracle dense-step CONFIG.json OUT.safetensors [--seed N] [--ctx L]\n"
    "                [--state-seed S] [--hidden-seed H]\n"
    "  mk-oracle kimi48b-step CONFIG.json OUT.safetensors [--seed N] [--ctx L]\n"
    "                [--token T]   (CONFIG.json: a Kimi-Linear-48B HF config)\n"
    "  mk-oracle convert-hf SPEC.json CHECKPOINT_DIR OUT.safetensors\n"
    "                (a dense GQA or released Kimi-Linear spec's weights from a\n"
    "                Hugging Face checkpoint)\n"
    "defaults: --seed 0 --ctx 0 --state-seed 1 --hidden-seed 2 --steps 1 --token 1\n";

int usageError(const std::string &msg) {
  std::fprintf(stderr, "mk-oracle: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "mk-oracle: %s\n", msg.c_str());
  return 1;
}

struct Options {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values; // --name value
  bool trace = false;
};

bool parseArgs(int argc, char **argv, const std::vector<std::string> &allowed,
               Options &o, std::string &error) {
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      o.positional.push_back(a);
      continue;
    }
    if (a == "--trace") {
      o.trace = true;
      continue;
    }
    bool ok = false;
    for (const std::string &n : allowed)
      ok = ok || n == a;
    if (!ok) {
      error = "unknown option '" + a + "'";
      return false;
    }
    if (i + 1 >= argc) {
      error = "option '" + a + "' needs a value";
      return false;
    }
    if (o.values.count(a)) {
      error = "option '" + a + "' given twice";
      return false;
    }
    o.values[a] = argv[++i];
  }
  return true;
}

bool getInt(const Options &o, const std::string &name, int64_t def,
            int64_t minValue, int64_t &out, std::string &error) {
  auto it = o.values.find(name);
  if (it == o.values.end()) {
    out = def;
    return true;
  }
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE || v < minValue) {
    error = "option '" + name + "' needs an integer >= " +
            std::to_string(minValue) + ", got '" + it->second + "'";
    return false;
  }
  out = v;
  return true;
}

bool loadSpec(const std::string &path, BlockConfig &cfg) {
  std::string err;
  if (!loadBlockSpecFile(path, cfg, err)) {
    std::fprintf(stderr, "mk-oracle: %s\n", err.c_str());
    return false;
  }
  return true;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

HostTensor hiddenTensor(const std::string &name,
                        const std::vector<BFloat16> &h) {
  HostTensor t(TensorDesc{name, DType::BF16, {int64_t(h.size())}});
  for (size_t i = 0; i < h.size(); ++i)
    t.bf16()[i] = h[i];
  return t;
}

int writeWeights(int argc, char **argv) {
  Options o;
  std::string err;
  int64_t seed;
  if (!parseArgs(argc, argv, {"--seed"}, o, err) || o.trace)
    return usageError(err.empty() ? "--trace is only for 'run'" : err);
  if (o.positional.size() != 2)
    return usageError("write-weights needs SPEC.json and OUT.safetensors");
  if (!getInt(o, "--seed", 0, 0, seed, err))
    return usageError(err);
  BlockConfig cfg;
  if (!loadSpec(o.positional[0], cfg))
    return 1;
  auto t0 = std::chrono::steady_clock::now();
  TensorMap w = makeRandomWeights(cfg, uint64_t(seed));
  if (!writeSafetensors(o.positional[1], w, err,
                        {{"format", "mk-weights-1"},
                         {"spec", blockConfigToJson(cfg)},
                         {"seed", std::to_string(seed)}}))
    return fail(err);
  std::printf("wrote %zu tensors of '%s' (seed %lld) to %s in %.1f s\n",
              w.size(), cfg.name.c_str(), (long long)seed,
              o.positional[1].c_str(), secondsSince(t0));
  return 0;
}

/// The whole model's input: a token id, i32 [1].
HostTensor tokenTensor(int64_t token) {
  HostTensor t(TensorDesc{"token", DType::I32, {1}});
  *reinterpret_cast<int32_t *>(t.data.data()) = int32_t(token);
  return t;
}
/// A token id of `cfg`'s vocabulary drawn from `seed`.
int64_t randomToken(const BlockConfig &cfg, uint64_t seed) {
  return int64_t(testdata::mix64(testdata::streamFor(seed, "token")) % uint64_t(cfg.vocab));
}

int writeInputs(int argc, char **argv) {
  Options o;
  std::string err;
  int64_t ctx, stateSeed, hiddenSeed;
  if (!parseArgs(argc, argv, {"--ctx", "--state-seed", "--hidden-seed"}, o,
                 err) ||
      o.trace)
    return usageError(err.empty() ? "--trace is only for 'run'" : err);
  if (o.positional.size() != 2)
    return usageError("write-inputs needs SPEC.json and OUT.safetensors");
  if (!getInt(o, "--ctx", 0, 0, ctx, err) ||
      !getInt(o, "--state-seed", 1, 0, stateSeed, err) ||
      !getInt(o, "--hidden-seed", 2, 0, hiddenSeed, err))
    return usageError(err);
  BlockConfig cfg;
  if (!loadSpec(o.positional[0], cfg))
    return 1;
  DecodeState st = makeRandomState(cfg, ctx, uint64_t(stateSeed));
  TensorMap all = st.tensors;
  if (cfg.vocab > 0) // the whole model: a token id from the hidden seed
    all.emplace("token", tokenTensor(randomToken(cfg, uint64_t(hiddenSeed))));
  else
    all.emplace("hidden",
                hiddenTensor("hidden", makeRandomHidden(cfg, uint64_t(hiddenSeed))));
  if (!writeSafetensors(o.positional[1], all, err,
                        {{"format", "mk-inputs-1"},
                         {"ctx_len", std::to_string(ctx)}}))
    return fail(err);
  std::printf("wrote state (ctx %lld) and hidden of '%s' to %s\n",
              (long long)ctx, cfg.name.c_str(), o.positional[1].c_str());
  return 0;
}

void printChecksum(int64_t step, int64_t ctx, const std::vector<BFloat16> &h,
                   double seconds) {
  double sum = 0, sumsq = 0;
  bool finite = true;
  for (const BFloat16 &v : h) {
    double f = v.toFloat();
    finite = finite && std::isfinite(f);
    sum += f;
    sumsq += f * f;
  }
  std::printf("step %lld ctx %lld: sum %.9g sumsq %.9g first [", (long long)step,
              (long long)ctx, sum, sumsq);
  for (size_t i = 0; i < h.size() && i < 4; ++i)
    std::printf("%s%.6g", i ? ", " : "", double(h[i].toFloat()));
  std::printf("]%s (%.2f s)\n", finite ? "" : " NON-FINITE", seconds);
}

int run(int argc, char **argv) {
  Options o;
  std::string err;
  if (!parseArgs(argc, argv,
                 {"--weights", "--seed", "--inputs", "--ctx", "--state-seed",
                  "--hidden-seed", "--steps", "--dump"},
                 o, err))
    return usageError(err);
  if (o.positional.size() != 1)
    return usageError("run needs exactly one SPEC.json");
  if (o.values.count("--weights") && o.values.count("--seed"))
    return usageError("give either --weights or --seed, not both");
  if (o.values.count("--inputs"))
    for (const char *n : {"--ctx", "--state-seed", "--hidden-seed"})
      if (o.values.count(n))
        return usageError(std::string("--inputs and ") + n +
                          " cannot be combined");
  int64_t seed, ctx, stateSeed, hiddenSeed, steps;
  if (!getInt(o, "--seed", 0, 0, seed, err) ||
      !getInt(o, "--ctx", 0, 0, ctx, err) ||
      !getInt(o, "--state-seed", 1, 0, stateSeed, err) ||
      !getInt(o, "--hidden-seed", 2, 0, hiddenSeed, err) ||
      !getInt(o, "--steps", 1, 1, steps, err))
    return usageError(err);
  BlockConfig cfg;
  if (!loadSpec(o.positional[0], cfg))
    return 1;

  auto t0 = std::chrono::steady_clock::now();
  TensorMap weights;
  if (o.values.count("--weights")) {
    std::vector<std::string> problems;
    if (!loadCheckedSafetensors(o.values["--weights"], parameterTensors(cfg),
                                weights, problems)) {
      std::fprintf(stderr,
                   "mk-oracle: %s does not hold the weights of spec '%s' "
                   "(%zu problems):\n",
                   o.values["--weights"].c_str(), cfg.name.c_str(),
                   problems.size());
      for (const std::string &p : problems)
        std::fprintf(stderr, "  %s\n", p.c_str());
      return 1;
    }
  } else {
    weights = makeRandomWeights(cfg, uint64_t(seed));
  }
  std::printf("weights ready in %.1f s\n", secondsSince(t0));

  DecodeState st;
  std::vector<BFloat16> hidden;
  int64_t token = 0; // the whole model's input (cfg.vocab > 0)
  ModelStepResult model;
  if (o.values.count("--inputs")) {
    const std::string &path = o.values["--inputs"];
    TensorMap in;
    std::vector<std::string> problems;
    if (!readSafetensors(path, in, problems)) {
      for (const std::string &p : problems)
        std::fprintf(stderr, "mk-oracle: %s\n", p.c_str());
      return 1;
    }
    // The cache row count is whatever the file holds (any cache: a state
    // whose leading dim the catalogue leaves to the context).
    int64_t rows = 0;
    for (const TensorDesc &t : stateTensors(cfg, -1)) {
      auto it = in.find(t.name);
      if (!t.shape.empty() && t.shape[0] < 0 && it != in.end() &&
          !it->second.desc.shape.empty()) {
        rows = it->second.desc.shape[0];
        break;
      }
    }
    std::vector<TensorDesc> want = stateTensors(cfg, rows);
    if (cfg.vocab > 0)
      want.push_back({"token", DType::I32, {1}});
    else
      want.push_back({"hidden", DType::BF16, {cfg.hidden}});
    if (!checkTensors(in, want, problems)) {
      std::fprintf(stderr, "mk-oracle: %s does not hold inputs of spec '%s':\n",
                   path.c_str(), cfg.name.c_str());
      for (const std::string &p : problems)
        std::fprintf(stderr, "  %s\n", p.c_str());
      return 1;
    }
    if (cfg.vocab > 0) {
      token = *reinterpret_cast<const int32_t *>(in.at("token").data.data());
      if (token < 0 || token >= cfg.vocab) {
        std::fprintf(stderr, "mk-oracle: %s: token %lld outside the vocabulary 0..%lld\n",
                     path.c_str(), (long long)token, (long long)cfg.vocab - 1);
        return 1;
      }
      in.erase("token");
    } else {
      const HostTensor &h = in.at("hidden");
      hidden.assign(h.bf16(), h.bf16() + cfg.hidden);
      in.erase("hidden");
    }
    st.tensors = std::move(in);
    st.ctxLen = rows;
  } else {
    st = makeRandomState(cfg, ctx, uint64_t(stateSeed));
    if (cfg.vocab > 0)
      token = randomToken(cfg, uint64_t(hiddenSeed));
    else
      hidden = makeRandomHidden(cfg, uint64_t(hiddenSeed));
  }

  OracleTrace trace;
  for (int64_t s = 0; s < steps; ++s) {
    auto ts = std::chrono::steady_clock::now();
    int64_t pos = st.ctxLen;
    if (cfg.vocab > 0) {
      // The whole model decodes greedily: each step's next token is the
      // following step's input.
      model = oracleModelStep(cfg, weights, st, token, o.trace ? &trace : nullptr);
      printChecksum(s, pos, model.logits, secondsSince(ts));
      std::printf("  token %lld -> next %lld\n", (long long)token, (long long)model.next);
      token = model.next;
    } else {
      hidden = oracleStep(cfg, weights, st, hidden, o.trace ? &trace : nullptr);
      printChecksum(s, pos, hidden, secondsSince(ts));
    }
    if (o.trace)
      for (const auto &kv : trace.values) {
        double ss = 0;
        for (float v : kv.second)
          ss += double(v) * v;
        std::printf("  %-22s n=%-6zu rms %.6g\n", kv.first.c_str(),
                    kv.second.size(),
                    kv.second.empty() ? 0.0 : std::sqrt(ss / kv.second.size()));
      }
  }
  if (o.values.count("--dump")) {
    TensorMap out = st.tensors;
    if (cfg.vocab > 0) {
      // The last step's logits and next token.
      out.emplace("logits", hiddenTensor("logits", model.logits));
      HostTensor next = tokenTensor(model.next);
      next.desc.name = "next_token";
      out.emplace("next_token", std::move(next));
    } else {
      out.emplace("hidden_out", hiddenTensor("hidden_out", hidden));
    }
    if (!writeSafetensors(o.values["--dump"], out, err,
                          {{"format", "mk-outputs-1"},
                           {"ctx_len", std::to_string(st.ctxLen)}}))
      return fail(err);
  }
  return 0;
}

} // namespace

/// One step of the dense GQA family (docs/semantics-dense-gqa.md) from
/// seeded weights, caches and token, all written with the results into one
/// file: the weights (spec names), `hidden` and `state.i.{k,v}_cache` (ctx
/// rows) in, `hidden_out` and `state_out.i.{k,v}_cache` (ctx + 1 rows) out.
/// What tests/python/reference_dense.py recomputes independently.
static int denseStep(int argc, char **argv) {
  Options o;
  std::string err;
  int64_t seed, ctx, stateSeed, hiddenSeed;
  if (!parseArgs(argc, argv, {"--seed", "--ctx", "--state-seed", "--hidden-seed"}, o, err) ||
      o.trace)
    return usageError(err.empty() ? "--trace is only for 'run'" : err);
  if (o.positional.size() != 2)
    return usageError("dense-step needs CONFIG.json and OUT.safetensors");
  if (!getInt(o, "--seed", 0, 0, seed, err) || !getInt(o, "--ctx", 0, 0, ctx, err) ||
      !getInt(o, "--state-seed", 1, 0, stateSeed, err) ||
      !getInt(o, "--hidden-seed", 2, 0, hiddenSeed, err))
    return usageError(err);
  std::string text;
  if (!readTextFile(o.positional[0], text, err))
    return fail(err);
  oracle::DenseGqaConfig c;
  if (std::string bad = oracle::parseDenseGqaConfig(text, c); !bad.empty())
    return fail(o.positional[0] + ": " + bad);
  const auto t0 = std::chrono::steady_clock::now();
  TensorMap all = oracle::makeRandomDenseGqaWeights(c, uint64_t(seed));
  const int64_t kvd = c.kvHeads * c.headDim;
  auto randomBf16 = [](uint64_t s, const std::string &name, int64_t n, double sd) {
    std::vector<BFloat16> v(static_cast<size_t>(n));
    testdata::fillNormalBf16(testdata::streamFor(s, name), 0, n, sd, v.data());
    return v;
  };
  auto cacheTensor = [&](const std::string &name, const std::vector<BFloat16> &v, int64_t rows) {
    HostTensor t(TensorDesc{name, DType::BF16, {rows, c.kvHeads, c.headDim}});
    for (size_t i = 0; i < v.size(); ++i)
      t.bf16()[i] = v[i];
    return t;
  };
  std::vector<std::vector<BFloat16>> ks, vs;
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "state." + std::to_string(i) + ".";
    ks.push_back(randomBf16(uint64_t(stateSeed), p + "k_cache", ctx * kvd, 1.0));
    vs.push_back(randomBf16(uint64_t(stateSeed), p + "v_cache", ctx * kvd, 1.0));
    all.emplace(p + "k_cache", cacheTensor(p + "k_cache", ks.back(), ctx));
    all.emplace(p + "v_cache", cacheTensor(p + "v_cache", vs.back(), ctx));
  }
  const std::vector<BFloat16> x =
      randomBf16(uint64_t(hiddenSeed), "hidden", c.hidden, testdata::kHiddenStddev);
  all.emplace("hidden", hiddenTensor("hidden", x));
  const std::vector<BFloat16> y = oracle::denseGqaStep(c, all, x, ks, vs, ctx);
  all.emplace("hidden_out", hiddenTensor("hidden_out", y));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "state_out." + std::to_string(i) + ".";
    all.emplace(p + "k_cache", cacheTensor(p + "k_cache", ks[size_t(i)], ctx + 1));
    all.emplace(p + "v_cache", cacheTensor(p + "v_cache", vs[size_t(i)], ctx + 1));
  }
  if (!writeSafetensors(o.positional[1], all, err,
                        {{"format", "mk-dense-step-1"}, {"ctx_len", std::to_string(ctx)}}))
    return fail(err);
  printChecksum(0, ctx, y, secondsSince(t0));
  return 0;
}

/// One decode step of Kimi-Linear-48B-A3B (docs/semantics-kimi-linear-48b.md)
/// from seeded weights (`--seed`, HF names) and a seeded state of `ctx` MLA
/// rows (state seed = seed + 1), all written with the results into one file:
/// the weights, `state.i.*` (before), `token` (i32 [1]), `state_out.i.*`
/// (after), `logits` (bf16 [vocab]) and `next_token` (i32 [1]). What
/// tests/python/reference_kimi48b.py recomputes independently.
static int kimi48bStep(int argc, char **argv) {
  Options o;
  std::string err;
  int64_t seed, ctx, token;
  if (!parseArgs(argc, argv, {"--seed", "--ctx", "--token"}, o, err) || o.trace)
    return usageError(err.empty() ? "--trace is only for 'run'" : err);
  if (o.positional.size() != 2)
    return usageError("kimi48b-step needs CONFIG.json and OUT.safetensors");
  if (!getInt(o, "--seed", 0, 0, seed, err) || !getInt(o, "--ctx", 0, 0, ctx, err) ||
      !getInt(o, "--token", 1, 0, token, err))
    return usageError(err);
  oracle::Kimi48bConfig c;
  if (!oracle::parseKimi48bConfig(o.positional[0], c, err))
    return fail(o.positional[0] + ": " + err);
  if (token >= c.vocab)
    return usageError("--token " + std::to_string(token) + " is not below vocab_size " +
                      std::to_string(c.vocab));
  const auto t0 = std::chrono::steady_clock::now();
  TensorMap all = oracle::makeRandomKimi48bWeights(c, uint64_t(seed));
  oracle::Kimi48bState st = oracle::makeRandomKimi48bState(c, ctx, uint64_t(seed) + 1);
  for (const auto &kv : st.tensors)
    all.emplace(kv.first, kv.second);
  HostTensor tok(TensorDesc{"token", DType::I32, {1}});
  tok.i32()[0] = int32_t(token);
  all.emplace("token", std::move(tok));
  const oracle::Kimi48bResult r = oracle::kimi48bStep(c, all, st, token);
  for (auto &kv : st.tensors) {
    const std::string name = "state_out." + kv.first.substr(6); // "state." -> "state_out."
    HostTensor t = std::move(kv.second);
    t.desc.name = name;
    all.emplace(name, std::move(t));
  }
  all.emplace("logits", hiddenTensor("logits", r.logits));
  HostTensor next(TensorDesc{"next_token", DType::I32, {1}});
  next.i32()[0] = int32_t(r.next);
  all.emplace("next_token", std::move(next));
  if (!writeSafetensors(o.positional[1], all, err,
                        {{"format", "mk-kimi48b-step-1"},
                         {"ctx_len", std::to_string(ctx)},
                         {"seed", std::to_string(seed)}}))
    return fail(err);
  printChecksum(0, ctx, r.logits, secondsSince(t0));
  std::printf("next token %lld\n", static_cast<long long>(r.next));
  return 0;
}

/// convert-hf: a spec's weights (dense GQA, or the released Kimi-Linear layout) from a Hugging Face checkpoint
/// (HfCheckpoint.h), written as the spec's safetensors.
int convertHf(int argc, char **argv) {
  Options o;
  std::string err;
  if (!parseArgs(argc, argv, {}, o, err) || o.trace)
    return usageError(err.empty() ? "--trace is only for 'run'" : err);
  if (o.positional.size() != 3)
    return usageError("convert-hf needs SPEC.json, CHECKPOINT_DIR and OUT.safetensors");
  BlockConfig cfg;
  if (!loadSpec(o.positional[0], cfg))
    return 1;
  auto t0 = std::chrono::steady_clock::now();
  TensorMap w;
  std::vector<std::string> problems;
  HfConversion info;
  if (!convertHfCheckpoint(cfg, o.positional[1], w, problems, &info)) {
    for (const std::string &p : problems)
      std::fprintf(stderr, "mk-oracle: %s\n", p.c_str());
    return 1;
  }
  if (!writeSafetensors(o.positional[2], w, err,
                        {{"format", "mk-weights-1"},
                         {"spec", blockConfigToJson(cfg)},
                         {"source", o.positional[1]}}))
    return fail(err);
  std::printf("wrote %zu tensors of '%s' from %zu checkpoint file(s) to %s in %.1f s; "
              "%zu checkpoint tensors unused\n",
              w.size(), cfg.name.c_str(), info.files.size(), o.positional[2].c_str(),
              secondsSince(t0), info.unused.size());
  for (const std::string &u : info.unused)
    std::printf("  unused: %s\n", u.c_str());
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usageError("missing command");
  std::string cmd = argv[1];
  if (cmd == "write-weights")
    return writeWeights(argc, argv);
  if (cmd == "write-inputs")
    return writeInputs(argc, argv);
  if (cmd == "run")
    return run(argc, argv);
  if (cmd == "dense-step")
    return denseStep(argc, argv);
  if (cmd == "kimi48b-step")
    return kimi48bStep(argc, argv);
  if (cmd == "convert-hf")
    return convertHf(argc, argv);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::printf("%s", kUsage);
    return 0;
  }
  return usageError("unknown command '" + cmd + "'");
}
