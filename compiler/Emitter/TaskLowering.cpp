//===- TaskLowering.cpp - One task instance -> template calls -------------===//
//
// Each task op becomes the call of its device template from templates/
// (with the partition's tile sizes and the buffers' addresses): the op's
// TaskCudaLowering model (attached here, registerTaskLoweringModels) calls
// the Emitter::lowerTask overload of its op class; emitInstance dispatches
// through the interface, not on the kind.
// The register-hungry templates are called through the __noinline__
// trampoline mkgen::call<&mk::template<...>>(...): inlined into the one
// kernel body, their live ranges would add up with everything else's and
// spill.
//
//===----------------------------------------------------------------------===//

#include "Emitter/EmitterImpl.h"
#include "mk/Dialect/Schedule/TaskKinds.h"

using namespace mk::emitter::detail;

/// The dialect's registry (mk/Dialect/Schedule/TaskKinds.h) says what each
/// kind's arguments hold; the task and kernel verifiers have checked their
/// types and the names they resolve to. A lowering also reads the
/// partition's (tile sizes, slices), which only schedule-partition-work
/// adds: a task without them is refused by name instead of crashing the
/// emitter or writing CUDA that does not compile.
LogicalResult Emitter::checkTaskArgs(TaskOpInterface t) {
  return mk::schedule::verifyTaskArgs(t, mk::schedule::TaskArgStage::Partitioned);
}

LogicalResult Emitter::emitInstance(TaskOpInterface t, llvm::raw_ostream &o) {
  FailureOr<int64_t> group = taskGroup(t);
  if (failed(group))
    return failure();
  // Each lowering reads its task's arguments through its op's accessors
  // (ODS), so it reads only what the kind declares.
  if (auto lowering = dyn_cast<TaskCudaLowering>(t.getOperation()))
    return lowering.emitInstance(*this, *group, o);
  if (isa<ResidualRmsnormOp>(t.getOperation()))
    return t.emitOpError("kind '") << taskKindName(t.getKind())
                                   << "' is lowered only as an every_block task";
  return t.emitOpError("the CUDA emitter has no lowering for kind '")
         << taskKindName(t.getKind()) << "'";
}

LogicalResult Emitter::lowerTask(MoeGateUpOp op, int64_t G, llvm::raw_ostream &o) {
  return lowerMoe(op, G, o);
}

LogicalResult Emitter::lowerTask(MoeDownOp op, int64_t G, llvm::raw_ostream &o) {
  return lowerMoe(op, G, o);
}

LogicalResult Emitter::lowerTask(W4A16GemvOp op, int64_t G, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  auto weights = mk::schedule::argNames(op.getWeights()),
       outputs = mk::schedule::argNames(op.getOutputs());
  auto ns = mk::schedule::argInts(op.getN());
  // The partition's arguments (tn, ksplit, tiles) are present: checkTaskArgs.
  int64_t k = int64_t(op.getK()), tn = int64_t(op.getTn().value_or(0)),
          ks = int64_t(op.getKsplit().value_or(0)), tiles = int64_t(op.getTiles().value_or(0)),
          unitCols = int64_t(op.getUnitCols().value_or(0));
  bool atomic = op.getEpilogue().value_or("") == "atomic_f32";
  BufferOp in = buffers.lookup(op.getInput());
  bool shared = in.getSpace() == "shared";
  int64_t kslice = k / ks;
  for (const auto &w : weights)
    if (failed(checkPackedRead(t, w, tn, kslice)))
      return failure();
  emitGemvSlice(t, o);
  // An input in global memory: the tile stages its k-slice into
  // work[0, kslice) while its first weights load (w4a16_gemv_tile_staged;
  // a bf16 input as stored, an fp32 one a sum the spec rounds to bf16
  // before the projection, the MLA combine's slices).
  // A wait for the input in the tile's prologue (schedule-prologue-waits
  // `gemv`, on by default): the staged tile's waiting form, after its first
  // weights.
  const std::string waitType = prologueWaitType, wait = takePrologueWait();
  if (!wait.empty() && shared)
    return t.emitOpError("waits for its input in its prologue, but the input @")
           << in.getSymName() << " is in shared memory (no staging to wait before)";
  // A gated norm input (schedule-fuse-kda-gated-norm): the tile stages the
  // norm of its heads of `input` (the gated delta's o) itself.
  const bool gatedNorm = bool(op.getGatedNormGateAttr());
  if (gatedNorm) {
    BufferOp gate = buffers.lookup(*op.getGatedNormGate());
    if (shared || in.getDtype() != "bf16" || !gate || gate.getDtype() != "bf16" ||
        gate.getSpace() == "shared")
      return t.emitOpError("stages a gated norm of @")
             << in.getSymName() << ": its input and gate must be bf16 buffers outside shared "
             << "memory";
    if (*op.getGatedNormHeadDim() % 32)
      return t.emitOpError("stages a gated norm of heads of ")
             << *op.getGatedNormHeadDim() << " values: the staging takes multiples of 32";
  }
  std::string staged;
  if (gatedNorm) {
    staged = ptr(in.getSymName()) + ", " + ptr(*op.getGatedNormGate()) + ", " +
             ident(*op.getGatedNormWeight()) + ", " +
             fmtFloat(op.getGatedNormEps()->convertToDouble()) + ", work";
  } else if (!shared) {
    staged = ptr(in.getSymName()) + " + " +
             std::to_string(int64_t(op.getInputOffset().value_or(0))) + ", work";
  }
  if (!staged.empty()) {
    needWork(kslice + w4Red(tn));
    o << "      float *red = work + " << kslice << ";\n";
  } else {
    needWork(w4Red(tn));
    o << "      float *red = work;\n";
  }
  asserts.insert(w4RedCheck(tn));
  const std::string epiType = atomic ? "mk::EpiAtomicAddF32" : "mk::EpiStoreBf16";
  // Per segment (weight): the tile template called, its tile arguments, its
  // epilogue's output and column offset (a tile-contiguous weight's tile
  // gets local columns: the epilogue adds n0 back).
  struct Segment {
    std::string callee;
    TileArgParts args;
    std::string out, off;
  };
  SmallVector<Segment> segs;
  for (size_t s = 0; s < weights.size(); ++s) {
    Segment g;
    if (gatedNorm)
      g.callee = "mkgen::call<&mk::w4a16_gemv_tile_gated_norm_staged" +
                 std::string(wait.empty() ? "" : "_waiting") + "<" + std::to_string(T) + ", " +
                 std::to_string(tn) + ", " + std::to_string(G) + ", " + epiType + ", false, " +
                 orderName(weights[s]) + ", " +
                 std::to_string(int64_t(*op.getGatedNormHeadDim())) +
                 (wait.empty() ? "" : ", " + waitType) + ">>(" + staged + ", ";
    else if (!staged.empty())
      g.callee = "mkgen::call<&mk::w4a16_gemv_tile_staged" +
                 std::string(wait.empty() ? "" : "_waiting") + "<" + std::to_string(T) + ", " +
                 std::to_string(tn) + ", " + std::to_string(G) + ", " + epiType + ", false, " +
                 orderName(weights[s]) + ", " +
                 (in.getDtype() == "f32" ? "float" : "mk::bf16") +
                 (wait.empty() ? "" : ", " + waitType) + ">>(" + staged + ", ";
    else
      g.callee = "mkgen::call<&mk::w4a16_gemv_tile<" + std::to_string(T) + ", " +
                 std::to_string(tn) + ", " + std::to_string(G) + ", " + epiType +
                 orderArgs(weights[s], true) + ">>(xs, ";
    g.args = tileArgParts(weights[s], k, ns[s], tn, "", "n0");
    g.out = atomic ? ptr(outputs[s]) : ptr(outputs[s], true);
    g.off = tileOf(weights[s]) ? "n0" : "0";
    segs.push_back(std::move(g));
  }
  auto epiOf = [&](const std::string &out, const std::string &off) {
    return atomic ? "mk::EpiAtomicAddF32{" + out + ", 1.f, " + off + "}"
                  : "mk::EpiStoreBf16{" + out + ", " + off + "}";
  };
  const std::string begun = (begunTasks.contains(t.getName()) ? "t == t0" : "false") +
                            (wait.empty() ? std::string() : ", " + wait);
  const bool oneCallee = llvm::all_of(segs, [&](const Segment &g) {
    return g.callee == segs.front().callee && g.args.n0 == segs.front().args.n0 &&
           g.off == segs.front().off;
  });
  if (segs.size() == 1 || !oneCallee) {
    o << "      switch (seg) {\n";
    for (size_t s = 0; s < segs.size(); ++s)
      o << "      case " << s << ": " << segs[s].callee << segs[s].args.joined()
        << ", nvalid, k0, k1, red, " << epiOf(segs[s].out, segs[s].off) << ", " << begun
        << "); break;\n";
    o << "      }\n";
    // The output's argmax merged by the tiles (schedule-fuse-argmax; one
    // weight, whole tiles: verifyArgmaxOfTiles), over the columns the tile
    // has just stored; the last of the task's instances writes the index.
    if (std::optional<StringRef> argmaxOut = op.getArgmaxOutput()) {
      needStaticShared("argmax", 8 * 32); // the block's best keys (argmax_merge_range)
      o << "      mkgen::call<&mk::argmax_of_tile<" << T << ">>(n0, nvalid, " << t.getCount()
        << ", " << ptr(outputs.front()) << ", " << ptr(*op.getArgmaxScratch(), true) << ", "
        << ptr(*argmaxOut, true) << ");\n";
    }
    return success();
  }
  // One template for every segment: the segment picks the pointers and the
  // width, and ONE call site serves them all (a call per segment kept each
  // call's arguments live across the kernel body: the 36-layer dense spec
  // spilled 764 B on sm_90 with the switch, none with this).
  // A choice among the segments' values (the value itself where they agree).
  auto pick = [&](auto field) {
    std::string e = field(segs.back());
    if (llvm::all_of(segs, [&](const Segment &g) { return field(g) == e; }))
      return e;
    for (size_t s = segs.size() - 1; s-- > 0;)
      e = "seg == " + std::to_string(s) + " ? " + field(segs[s]) + " : " + e;
    return e;
  };
  const char *outType = atomic ? "float" : "mk::bf16";
  // Outputs in the workspace: one address from the chosen offset.
  const bool wsOutputs = llvm::all_of(outputs, [&](const std::string &n) {
    BufferOp b = buffers.lookup(n);
    return b && b.getSpace() == "workspace" && b.getDtype() == (atomic ? "f32" : "bf16");
  });
  if (wsOutputs)
    for (size_t s = 0; s < segs.size(); ++s)
      segs[s].out = std::to_string(buffers.lookup(outputs[s]).getOffset());
  o << "      const uint8_t *const sq = " << pick([](const Segment &g) { return g.args.q; })
    << ";\n"
    << "      const mk::bf16 *const ss = " << pick([](const Segment &g) { return g.args.s; })
    << ";\n"
    << "      const mk::bf16 *const sz = " << pick([](const Segment &g) { return g.args.z; })
    << ";\n"
    << "      const int sn = " << pick([](const Segment &g) { return g.args.n; }) << ";\n"
    << "      " << outType << " *const so = "
    << (wsOutputs ? std::string("reinterpret_cast<") + outType + " *>(wsp + (" +
                        pick([](const Segment &g) { return g.out; }) + "))"
                  : pick([](const Segment &g) { return g.out; }))
    << ";\n"
    << "      " << segs.front().callee << "sq, ss, sz, sn, " << segs.front().args.n0
    << ", nvalid, k0, k1, red, " << epiOf("so", segs.front().off) << ", " << begun << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(Bf16RowsOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  int64_t rpt = int64_t(op.getRowsPerTask().value_or(0)), rows = int64_t(op.getRows());
  needStaticShared("bf16_rows_gemv", 4 * (T / 32)); // its warps' partial sums
  // A polled output (schedule-poll-router-logits): the polled stores.
  const bool f32 = buffers.lookup(op.getOutput()).getDtype() == "f32";
  o << "      const int row0 = i * " << rpt << ";\n"
    << "      mkgen::call<&mk::bf16_rows_gemv<" << T
    << (op.getPolledOutput() ? (f32 ? ", float, true" : ", mk::bf16, true")
                             : (f32 ? ", float" : ""))
    << ">>(xs, "
    << ident(op.getWeight())
    << ", " << int64_t(op.getK()) << ", row0, min(" << rpt << ", " << rows
    << " - row0), " << ptr(op.getOutput(), true) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(KdaHeadChunkOp op, int64_t G, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  int64_t dk = int64_t(op.getHeadDim()), chunk = int64_t(op.getChunk().value_or(0)),
          conv = int64_t(op.getConv());
  int64_t c = int64_t(op.getHeads()) * dk;
  needWork(mk::kdaSmemFloats(T, dk, chunk));
  asserts.insert(llvm::formatv("mk::kda_smem_floats<{0}, {1}, {2}>() == {3}", T, dk, chunk,
                               mk::kdaSmemFloats(T, dk, chunk))
                     .str());
  // The output projection folded in (schedule-fuse-kda-o-proj): the
  // task's rows of W_o, by W_o's storage.
  StringRef ow = op.getOWeight().value_or("");
  const int64_t on = int64_t(op.getON().value_or(0));
  if (!ow.empty()) {
    if (op.getOAcc().value_or("").empty() || !on || chunk % 16 || on % 128 || G % 16)
      return t.emitOpError("a folded output projection needs o_acc, o_n a multiple of "
                           "128, chunk a multiple of 16 and groups of 16k rows");
    const mk::PackedOrder order = orderOf(ow);
    if (order == mk::PackedOrder::Int8 || (tileOf(ow) && tileOf(ow) != 128))
      return t.emitOpError("folded output projection weight '")
             << ow << "' must be row-major, 128-wide tile-contiguous or in the mma order";
    const int64_t floats = mk::kdaOProjSmemFloats(T, dk, chunk, on);
    needWork(floats);
    asserts.insert(llvm::formatv("mk::kda_o_proj_smem_floats<{0}, {1}, {2}, {3}>() == {4}", T,
                                 dk, chunk, on, floats)
                       .str());
    o << "      mkgen::call<&mk::kda_head_chunk_o_proj_task<" << T << ", " << dk << ", "
      << chunk << ", " << conv << ", " << G << ", " << on << ", "
      << (order == mk::PackedOrder::Mma ? "mk::kOrderMma" : "mk::kOrderRowMajor") << ", "
      << (tileOf(ow) ? "true" : "false") << ">>(i, " << c << ", ";
  }
  // The released form's L2 norms and low-rank decay (either or both).
  const std::optional<llvm::APFloat> l2 = op.getQkL2Eps();
  const std::optional<StringRef> aLog = op.getALog(), dtBias = op.getDtBias();
  const bool released = l2 || aLog;
  if (aLog.has_value() != dtBias.has_value())
    return t.emitOpError("takes a_log and dt_bias together");
  if (released && !ow.empty())
    return t.emitOpError("a folded output projection has no form with qk_l2_eps or a_log");
  if (released)
    o << "      mkgen::call<&mk::kda_head_chunk_form<" << T << ", " << dk << ", " << chunk
      << ", " << conv << ", " << (l2 ? "true" : "false") << ", " << (aLog ? "true" : "false")
      << ">>(i, " << c << ", ";
  else if (ow.empty())
    o << "      mkgen::call<&mk::kda_head_chunk_task<" << T << ", " << dk << ", " << chunk
      << ", " << conv << ">>(i, " << c << ", ";
  o << ptr(op.getQ()) << ", "
    << ptr(op.getK()) << ", " << ptr(op.getV()) << ", " << ptr(op.getG())
    << ", " << ptr(op.getBeta()) << ", " << ident(op.getConvW()) << ", "
    << ptr(op.getCq()) << ", " << ptr(op.getCk()) << ", " << ptr(op.getCv())
    << ", " << ptr(op.getS()) << ", " << ptr(op.getS(), true) << ", "
    << ptr(op.getO(), true) << ", ";
  if (!ow.empty())
    o << wq(ow) << ", " << ws_(ow) << ", " << wz(ow) << ", " << ptr(op.getOAcc().value_or(""), true)
      << ", ";
  if (released)
    o << fmtFloat(l2 ? l2->convertToDouble() : 0.0) << ", "
      << (aLog ? ident(*aLog) : std::string("nullptr")) << ", "
      << (dtBias ? ident(*dtBias) : std::string("nullptr")) << ", ";
  o << "work);\n";
  auto cap = convCapture.find(t.getName());
  if (debug && cap != convCapture.end()) {
    // The instance's CHUNK channels of each conv output (all instances
    // together cover every channel), before conv_commit shifts the windows.
    int64_t nch = dk / chunk;
    o << "      { // debug capture: the short conv outputs\n"
      << "      const int c0 = (i / " << nch << ") * " << dk << " + (i % "
      << nch << ") * " << chunk << ";\n";
    const char *what[3] = {"q_conv", "k_conv", "v_conv"};
    const StringRef raw[3] = {op.getQ(), op.getK(), op.getV()},
                    win[3] = {op.getCq(), op.getCk(), op.getCv()};
    for (int j = 0; j < 3; ++j)
      o << "      mk::debug_short_conv<" << conv << ">(c0, " << chunk << ", "
        << c << ", " << ptr(raw[j]) << ", " << ptr(win[j]) << ", "
        << ident(op.getConvW()) << " + " << j * c * conv << ", "
        << capturePtr(cap->second, what[j]) << ");\n";
    o << "      }\n";
  }
  return success();
}

LogicalResult Emitter::lowerTask(KdaGatedNormOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  o << "      mkgen::call<&mk::kda_gated_norm_task<" << T << ", " << int64_t(op.getHeadDim())
    << ">>(i, " << ptr(op.getInput()) << ", " << ptr(op.getGate()) << ", "
    << ident(op.getWeight()) << ", " << fmtFloat(op.getEps().convertToDouble()) << ", "
    << ptr(op.getOutput(), true) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(ArgmaxOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  needStaticShared("argmax", 8 * 32); // the block's best keys (argmax_task)
  o << "      mkgen::call<&mk::argmax_task<" << T << ">>(i, " << t.getCount() << ", "
    << int64_t(op.getN()) << ", " << ptr(op.getInput()) << ", " << ptr(op.getScratch(), true)
    << ", " << ptr(op.getOutput(), true) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(ConvCommitOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  int64_t c = int64_t(op.getChannels()), n = t.getCount();
  int64_t per = (c + n - 1) / n;
  o << "      const mk::bf16 *const nr[3] = {" << ptr(op.getQ()) << ", "
    << ptr(op.getK()) << ", " << ptr(op.getV()) << "};\n"
    << "      const mk::bf16 *const wi[3] = {" << ptr(op.getCq()) << ", "
    << ptr(op.getCk()) << ", " << ptr(op.getCv()) << "};\n"
    << "      mk::bf16 *const wo[3] = {" << ptr(op.getCq(), true) << ", "
    << ptr(op.getCk(), true) << ", " << ptr(op.getCv(), true) << "};\n"
    << "      mkgen::call<&mk::conv_window_commit<" << int64_t(op.getConv()) << ">>(i * " << per
    << ", min(" << c << ", (i + 1) * " << per << "), " << c
    << ", nr, wi, wo);\n";
  return success();
}

LogicalResult Emitter::lowerTask(ZeroF32Op op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  int64_t n = int64_t(op.getN()), per = (n + t.getCount() - 1) / t.getCount();
  // An f32 buffer, or any other as floats (a polled bf16 one: its words
  // cleared).
  const std::string buf = ptr(op.getBuffer(), true);
  o << "      float *p = "
    << (buffers.lookup(op.getBuffer()).getDtype() == "f32"
            ? buf
            : "reinterpret_cast<float *>(" + buf + ")")
    << ";\n"
    << "      for (int j = i * " << per << " + threadIdx.x; j < min(" << n
    << ", (i + 1) * " << per << "); j += " << T << ") p[j] = 0.f;\n";
  return success();
}

LogicalResult Emitter::lowerTask(FinalResidualOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  int64_t n = int64_t(op.getDim()), per = (n + t.getCount() - 1) / t.getCount();
  o << "      const mk::bf16 *base = " << ptr(op.getBase()) << ";\n"
    << "      const float *acc = " << ptr(op.getAcc()) << ";\n";
  // With acc2, a second sum rounded apart: bf16(bf16(acc) + bf16(acc2)).
  const std::optional<StringRef> acc2 = op.getAcc2();
  if (acc2)
    o << "      const float *acc2 = " << ptr(*acc2) << ";\n";
  o << "      for (int j = i * " << per << " + threadIdx.x; j < min(" << n
    << ", (i + 1) * " << per << "); j += " << T << ")\n"
    << "        " << ptr(op.getOut(), true)
    << "[j] = mk::f2bf(mk::round_bf16(mk::bf2f(__ldcg(base + j)) + "
    << (acc2 ? "mk::round_bf16(mk::round_bf16(__ldcg(acc + j)) + "
               "mk::round_bf16(__ldcg(acc2 + j)))));\n"
             : "mk::round_bf16(__ldcg(acc + j))));\n");
  return success();
}

LogicalResult Emitter::lowerTask(MlaRopeAppendOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hm = int64_t(op.getHeads()), nope = int64_t(op.getNope()),
                rope = int64_t(op.getRope()), lora = int64_t(op.getLora());
  // Without theta the rope parts are copied as projected; with latent_norm
  // (and its latent_eps) the cached latent row is normalized.
  const std::optional<llvm::APFloat> theta = op.getTheta();
  const std::optional<StringRef> norm = op.getLatentNorm();
  if (norm.has_value() != op.getLatentEps().has_value())
    return op.emitOpError("takes latent_norm and latent_eps together");
  const std::optional<uint64_t> roundings = op.getLatentRoundings();
  if (roundings && *roundings != 1 && *roundings != 2)
    return op.emitOpError("latent_roundings must be 1 or 2, got ") << *roundings;
  const int normForm = !norm ? 0 : roundings ? int(*roundings) : 1;
  const bool plain = theta && !norm; // the unit's form, as emitted before
  if (norm)
    needStaticShared("mla_rope_append", 4 * 32); // the latent's block sum (block_sum scratch)
  o << "      mkgen::call<&mk::" << (plain ? "mla_rope_append" : "mla_rope_append_form") << "<"
    << T << ", " << hm << ", " << nope << ", " << rope << ", " << lora
    << (plain ? std::string()
              : std::string(", ") + (theta ? "true" : "false") + ", " + std::to_string(normForm))
    << ">>(i, " << t.getCount() << ", ctx_len, "
    << fmtFloat(theta ? theta->convertToDouble() : 0.0)
    << ", " << ptr(op.getQ()) << ", " << ptr(op.getKv()) << ", "
    << ptr(op.getQRope(), true) << ", " << ptr(op.getCKv()) << ", "
    << ptr(op.getKRope()) << ", " << ptr(op.getCKv(), true) << ", "
    << ptr(op.getKRope(), true);
  if (!plain)
    o << ", " << (norm ? ident(*norm) : std::string("nullptr")) << ", "
      << (norm ? fmtFloat(op.getLatentEps()->convertToDouble()) : std::string("0.f"));
  o << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(MlaQAbsorbOp op, int64_t G, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hm = int64_t(op.getHeads()), nope = int64_t(op.getNope()),
                rope = int64_t(op.getRope()), vh = int64_t(op.getVHead()),
                lora = int64_t(op.getLora());
  needWork(nope);
  std::string w = op.getKvB().str();
  // A wait for the projected queries in the task's prologue
  // (schedule-prologue-waits absorb=true): the waiting form, which loads
  // its first weights before it waits.
  const std::string wait = takePrologueWait();
  o << "      mkgen::call<&mk::mla_q_absorb_task" << (wait.empty() ? "" : "_waiting") << "<" << T
    << ", " << hm << ", " << nope << ", " << rope << ", " << vh << ", " << lora << ", " << G
    << (wait.empty() ? "" : ", " + prologueWaitType) << ">>(i, " << ptr(op.getQ()) << ", "
    << wq(w) << ", " << ws_(w) << ", " << wz(w) << ", " << ptr(op.getQAbs(), true) << ", work"
    << (wait.empty() ? std::string() : ", " + wait) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(MlaAttentionChunkOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hm = int64_t(op.getHeads()), rope = int64_t(op.getRope()),
                lora = int64_t(op.getLora());
  // Shared memory: the largest of the block-wide tensor-core form's (a ring
  // of `sub` (16, or with `sub_rows` 32) padded rows per slot, query rows in
  // `query_parts` parts (hi and lo, or with 1 hi only): up to 8 heads and
  // 16-row sub-chunks 3 slots and 8 query rows each, 9-16 heads 16 query
  // rows and 2 slots in two parts, 3 in one; partial scores,
  // probabilities, softmax state), the SIMT form's (-DMK_MLA_ATTENTION_SIMT:
  // queries, scores, 32 rows) and, where the shape takes it, the sliced
  // form's (-DMK_MLA_ATTENTION_SLICED: a ring of 4, 3 or 2 slots (the most
  // under 80 KB) of 16 rows per warp, each row the warp's latent slice and
  // rope k-steps padded; two buffers of partial scores, a float4 per lane
  // and head of the lane). The template's static_assert checks this mirror.
  const int64_t hg = int64_t(op.getHeadGroup().value_or(0));
  const int64_t subRows = t.getIntArg("sub_rows", kMlaTemplateSubRows);
  constexpr int64_t simtSub = 32;
  const int64_t sub = subRows, parts = t.getIntArg("query_parts", kMlaTemplateQueryParts);
  const int64_t stages = (hg > 8 && parts == 2) || sub > 16 ? 2 : 3;
  const int64_t row = lora + (rope + 15) / 16 * 16 + 8;
  const int64_t ksplit = T / 32 / (sub / 8);
  const int64_t queryRows = hg > 8 ? 16 : 8;
  const int64_t mmaF = (stages * sub + parts * queryRows) * row / 2 + ksplit * hg * sub +
                       hg * sub + 3 * hg;
  const int64_t simtF =
      (hg * lora + hg * rope + hg * simtSub + 3 * hg + 3) / 4 * 4 +
      (simtSub * lora + simtSub * rope) / 2;
  // The sliced form (mla_attention_sliced_fits in templates/mla.cuh).
  const int64_t warps = T / 32, ropeSteps = (rope + 15) / 16;
  const int64_t slicedRow = lora / warps + (ropeSteps + warps - 1) / warps * 16 + 8;
  auto slicedFloats = [&](int64_t slots) {
    return warps * slots * 16 * slicedRow / 2 + 2 * (hg > 8 ? 2 : 1) * warps * 32 * 4;
  };
  constexpr int64_t slicedMaxBytes = 80 * 1024;
  const int64_t slicedF = slicedFloats(slicedFloats(4) * 4 <= slicedMaxBytes   ? 4
                                       : slicedFloats(3) * 4 <= slicedMaxBytes ? 3
                                                                               : 2);
  const bool sliced = hg <= 16 && sub == 16 && lora % (16 * warps) == 0 &&
                      slicedF * 4 <= slicedMaxBytes;
  const int64_t f = std::max({mmaF, simtF, sliced ? slicedF : int64_t(0)});
  needWork(f);
  // -DMK_MLA_BULK_ROWS's ring mbarriers (mla_ring_bars: 4 x 8 B), there or not.
  needStaticShared("mla_ring_bars", 32);
  // The template's SUB and PARTS arguments only where they are not its
  // defaults (kMlaTemplateSubRows, kMlaTemplateQueryParts) or a later
  // argument follows: the partial sums' type where it is bf16
  // (schedule-form-phases mla-partials), float being the default.
  const std::string partialsArg = partialsTypeArg(op.getPartAcc());
  const bool spellParts = parts != kMlaTemplateQueryParts || !partialsArg.empty();
  const std::string subArg = sub != kMlaTemplateSubRows || spellParts
                                 ? ", " + std::to_string(sub)
                                 : std::string();
  const std::string partsArg = spellParts ? ", " + std::to_string(parts) : std::string();
  asserts.insert(
      llvm::formatv("mk::mla_attention_smem_floats<{0}, {1}, {2}, {3}{4}{5}>() == {6}",
                    T, hg, lora, rope, subArg, partsArg, f)
          .str());
  // A wait for the absorbed queries in the task's prologue
  // (schedule-prologue-waits `attention`, on by default): the waiting form, which asks
  // for its first rows before it waits.
  const std::string wait = takePrologueWait();
  const bool waiting = !wait.empty();
  o << "      const int nch = " << attentionChunks(t).count << ";\n";
  // An instance past the context's chunks runs no task but still waits, as
  // one whose wait sits before the task does: its signal then still means
  // that its waits have passed.
  if (waiting)
    o << "      if (i >= nch * " << hm / hg << ") " << wait << "();\n";
  o << "      if (i < nch * " << hm / hg << ")\n"
    << "        mkgen::call<&mk::mla_attention_chunk_task" << (waiting ? "_waiting" : "") << "<"
    << T << ", " << hm << ", " << hg << ", " << lora << ", " << rope
    << (waiting ? ", " + std::to_string(sub) + ", " + prologueWaitType : subArg) << partsArg
    << partialsArg << ">>(i, nch, ctx_len + 1, " << fmtFloat(op.getScale().convertToDouble()) << ", "
    << ptr(op.getQAbs()) << ", " << ptr(op.getQRope()) << ", " << ptr(op.getCKv(), true)
    << ", " << ptr(op.getKRope(), true) << ", " << ptr(op.getPartM(), true) << ", "
    << ptr(op.getPartL(), true) << ", " << ptr(op.getPartAcc(), true) << ", work"
    << (waiting ? ", " + wait : std::string()) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(MlaCombineWvOp op, int64_t G, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hm = int64_t(op.getHeads()), nope = int64_t(op.getNope()),
                vh = int64_t(op.getVHead()), lora = int64_t(op.getLora());
  const AttentionChunks chunks = attentionChunksOf(op.getPartM());
  asserts.insert(w4RedCheck(vh));
  std::string w = op.getKvB().str();
  int64_t slices = int64_t(op.getSlices().value_or(0)), span = lora / slices;
  // A wait for the chunks' partials in the task's prologue
  // (schedule-prologue-waits combine=true): the waiting form, whose GEMV
  // asks for its first W_v rows before the wait, and whose merge then
  // works in its own scratch past the GEMV's ring.
  const std::string wait = takePrologueWait();
  const bool waiting = !wait.empty();
  if (waiting) {
    const int64_t cpad = (chunks.maxChunks + 3) / 4 * 4;
    const int64_t f = lora + w4Red(vh) + 2 * cpad + span * (span >= T ? 1 : T / span);
    needWork(f);
    asserts.insert(llvm::formatv("mk::mla_combine_waiting_smem_floats<{0}, {1}, {2}>({3}, {4}) "
                                 "== {5}",
                                 T, vh, lora, span, chunks.maxChunks, f)
                       .str());
  } else {
    needWork(lora + w4Red(vh));
  }
  o << "      const int nch = " << chunks.count << ";\n"
    << "      const int h = i / " << slices << ", d0 = (i % " << slices
    << ") * " << span << ";\n"
    << "      mkgen::call<&mk::mla_combine_wv_task" << (waiting ? "_waiting" : "") << "<" << T
    << ", " << hm << ", " << nope << ", " << vh << ", " << lora << ", " << G
    << (waiting ? ", " + prologueWaitType : "") << partialsTypeArg(op.getPartAcc())
    << ">>(h, d0, d0 + " << span << ", nch, "
    << ptr(op.getPartM()) << ", " << ptr(op.getPartL()) << ", "
    << ptr(op.getPartAcc()) << ", " << wq(w) << ", " << ws_(w) << ", "
    << wz(w) << ", " << ptr(op.getO(), true) << ", work"
    << (waiting ? ", " + wait : std::string()) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(GqaRopeAppendOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hq = int64_t(op.getHeads()), hkv = int64_t(op.getKvHeads()),
                hd = int64_t(op.getHeadDim());
  o << "      mkgen::call<&mk::gqa_qk_norm_rope_append<" << T << ", " << hq << ", " << hkv
    << ", " << hd << ">>(i, " << t.getCount() << ", ctx_len, "
    // theta as a double literal: the template computes the angles in double.
    << llvm::formatv("{0:e17}", op.getTheta().convertToDouble())
    << ", " << fmtFloat(op.getEps().convertToDouble()) << ", "
    << ptr(op.getQ()) << ", " << ptr(op.getK()) << ", " << ptr(op.getV()) << ", "
    << ident(op.getQNorm()) << ", " << ident(op.getKNorm()) << ", "
    << ptr(op.getQOut(), true) << ", " << ptr(op.getKCache()) << ", "
    << ptr(op.getVCache()) << ", " << ptr(op.getKCache(), true) << ", "
    << ptr(op.getVCache(), true) << ");\n";
  return success();
}

LogicalResult Emitter::lowerTask(GqaAttentionChunkOp op, int64_t /*group*/,
                                 llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hq = int64_t(op.getHeads()), hkv = int64_t(op.getKvHeads()),
                hd = int64_t(op.getHeadDim());
  const int64_t rep = hq / hkv;
  // Every warp's running max, sum and weighted sum of the REP heads.
  const int64_t f = (T / 32) * rep * (hd + 2);
  needWork(f);
  asserts.insert(
      llvm::formatv("mk::gqa_attention_smem_floats<{0}, {1}, {2}>() == {3}", T, hd, rep, f).str());
  // The chunk count follows the context and the grid (the combine computes
  // the same one; -DMK_GQA_TASK_PER_BLOCK caps it at one task per block).
  o << "      const int nch = " << attentionChunks(t).count << ";\n"
    << "      if (i < nch * " << hkv << ")\n"
    << "        mkgen::call<&mk::gqa_attention_chunk<" << T << ", " << hd << ", " << rep
    << ">>(i, nch, " << hkv << ", ctx_len + 1, " << ptr(op.getQ()) << ", "
    << ptr(op.getKCache(), true) << ", " << ptr(op.getVCache(), true) << ", "
    << ptr(op.getPartM(), true) << ", " << ptr(op.getPartL(), true) << ", "
    << ptr(op.getPartAcc(), true) << ", work);\n";
  return success();
}

LogicalResult Emitter::lowerTask(GqaCombineOp op, int64_t /*group*/, llvm::raw_ostream &o) {
  TaskOpInterface t = op;
  const int64_t hq = int64_t(op.getHeads()), hd = int64_t(op.getHeadDim());
  // The chunk count is the attention's that wrote the partials (both compute
  // it from the context and its max_chunks).
  const AttentionChunks chunks = attentionChunksOf(op.getPartM());
  if (!chunks.maxChunks)
    return t.emitOpError("no gqa_attention_chunk task writes its partials @")
           << op.getPartM();
  needWork(2 * chunks.maxChunks);
  o << "      const int nch = " << chunks.count << ";\n"
    << "      mkgen::call<&mk::gqa_combine<" << T << ", " << hd << ">>(i, "
    << int64_t(op.getHeadsPerTask().value_or(0)) << ", " << hq << ", nch, " << ptr(op.getPartM())
    << ", " << ptr(op.getPartL()) << ", " << ptr(op.getPartAcc()) << ", "
    << ptr(op.getO(), true) << ", work);\n";
  return success();
}

/// Static shared memory of the router top-k's rank count (templates/topk_rank.cuh,
/// mk::topk_rank_shared_bytes, which a static_assert in the kernel holds
/// within this): 8 B per candidate of the two-level count, min(K, 32) for
/// each warp-sized run of the values, counted for every router of 64
/// experts or more with K < 32. An upper bound: routers of fewer than 128
/// take the two-level count only under -DMK_TOPK_TWO_LEVEL_ALL.
static int64_t topkRankSharedBytes(int64_t experts, int64_t topK) {
  if (experts < 64 || topK >= 32)
    return 0;
  const int64_t runs = (experts + 31) / 32, last = experts - 32 * (runs - 1);
  return 8 * (topK * (runs - 1) + std::min(last, topK));
}

template <class ExpertOp>
LogicalResult Emitter::lowerMoe(ExpertOp op, int64_t G, llvm::raw_ostream &o) {
  constexpr bool down = std::is_same_v<ExpertOp, MoeDownOp>;
  TaskOpInterface t = op;
  const StringRef logits = op.getLogits().value_or("");
  const bool routed = !logits.empty();
  // The partition's arguments (tn, ksplit, tiles) and, routed, the router's
  // (experts, top_k, scaling) are present: checkTaskArgs.
  int64_t d = int64_t(op.getHidden()), m = int64_t(op.getInter()),
          tn = int64_t(op.getTn().value_or(0)), ks = int64_t(op.getKsplit().value_or(0)),
          tiles = int64_t(op.getTiles().value_or(0));
  int64_t per = (down ? 1 : 2) * tiles * ks; // gate_up: gate and up tiles
  o << "      const int slot = i / " << per << ", r = i % " << per << ";\n";
  if (routed) {
    auto [it, fresh] = topkKey.try_emplace(logits, topkKey.size());
    // A sigmoid router (its correction bias set) or the unit's softmax.
    StringRef bias = op.getRouterBias().value_or("");
    // moe_topk's prob[E], moe_topk_sigmoid's score[E] and sel[E] (floats).
    const int64_t experts = int64_t(op.getExperts().value_or(0)),
                  topK = int64_t(op.getTopK().value_or(0));
    needStaticShared(
        ((bias.empty() ? "moe_topk<" : "moe_topk_sigmoid<") + Twine(experts) + ">").str(),
        (bias.empty() ? 4 : 8) * experts);
    // The rank count's candidates (the two-level count of wide routers),
    // once per (E, K) between both top-k forms.
    const int64_t candidateBytes = topkRankSharedBytes(experts, topK);
    needStaticShared(llvm::formatv("topk_by_rank<{0}, {1}>", experts, topK).str(),
                     candidateBytes);
    asserts.insert(llvm::formatv("mk::topk_rank_shared_bytes<{0}, {1}>() <= {2}", experts, topK,
                                 candidateBytes)
                       .str());
    o << "      if (tk_key != " << it->second << ") {\n"
      << "        MK_STAGE_BEGIN();\n"
      << "        mkgen::call<&mk::moe_topk" << (bias.empty() ? "" : "_sigmoid") << "<"
      << experts << ", " << topK << (op.getPollLogits() ? ", true" : "") << ">>("
      << ptr(logits)
      << ", " << (bias.empty() ? std::string() : ident(bias) + ", ")
      << fmtFloat(op.getScaling() ? op.getScaling()->convertToDouble() : 0.0)
      << ", tk_w, tk_idx);\n        MK_STAGE_END(mk::kStageTopk);\n"
      << "        tk_key = " << it->second << ";\n";
    if (!debug)
      emitRoutedL2Requests(op, logits, o);
    auto cap = topkCapture.find(logits);
    if (debug && cap != topkCapture.end())
      o << "        if (threadIdx.x < " << topK
        << ") { // debug capture: this block's top-k\n"
        << "          " << capturePtr(cap->second, "topk_idx")
        << "[threadIdx.x] = tk_idx[threadIdx.x];\n"
        << "          " << capturePtr(cap->second, "topk_w")
        << "[threadIdx.x] = tk_w[threadIdx.x];\n        }\n";
    o << "      }\n"
      << "      const int e = tk_idx[slot];\n";
  } else {
    o << "      const int e = slot;\n";
  }
  std::string sums = ptr(op.getSums(), true);
  if constexpr (!down) {
    // Instance r of a slot: matrix r / (tiles * ks) (0 gate, 1 up),
    // k-slice, then column tile; sums go to the slot's [2][inter] fp32
    // accumulator, which the down tasks read.
    std::string g = op.getGate().str(), u = op.getUp().str();
    int64_t kslice = d / ks;
    if (tileOf(g) != tileOf(u) || isPacked(g) != isPacked(u))
      return t.emitOpError("gate and up must share a storage layout");
    if (failed(checkPackedRead(t, g, tn, kslice)))
      return failure();
    needWork(w4Red(tn));
    o << "      const int mat = r / " << tiles * ks << ", rr = r % " << tiles * ks
      << ";\n"
      << "      const int k0 = (rr / " << tiles << ") * " << kslice
      << ", n0 = (rr % " << tiles << ") * " << tn << ";\n";
    o << "      const uint8_t *const wq = mat ? " << wq(u) << " : " << wq(g)
      << ";\n"
      << "      const mk::bf16 *const sc = mat ? " << ws_(u) << " : " << ws_(g)
      << ";\n"
      << "      const mk::bf16 *const zr = mat ? " << wz(u) << " : " << wz(g)
      << ";\n"
      << "      mkgen::call<&mk::w4a16_gemv_tile<" << T << ", " << tn << ", " << G
      << ", mk::EpiAtomicAddF32" << orderArgs(g, true) << ">>(xs, "
      << tileArgs("wq", "sc", "zr", tileOf(g) != 0, d, m, tn, "e", "n0", G) << ", min("
      << tn << ", " << m << " - n0), k0, k0 + " << kslice
      << ", work, mk::EpiAtomicAddF32{" << sums << " + (slot * 2 + mat) * " << m
      << ", 1.f, " << (tileOf(g) ? "n0" : "0") << "}, false);\n";
  } else {
    std::string w = op.getDown().str();
    int64_t kslice = m / ks;
    if (failed(checkPackedRead(t, w, tn, kslice)))
      return failure();
    // An expert wider than kMoeDownMaxStagedRows: each task stages only
    // its k-slice of hmid (the slice form); else the whole of it.
    const bool slice = m > mk::schedule::kMoeDownMaxStagedRows;
    const int64_t staged = slice ? kslice : m;
    needWork(staged + w4Red(tn));
    asserts.insert(llvm::formatv("mk::moe_down_smem_floats<{0}, {1}>({2}) == {3}",
                                 T, tn, staged, staged + w4Red(tn))
                       .str());
    // The bf16 steps: moe_down_task_bf16_steps(_waiting), whose last
    // argument says whether the expert's output is rounded too (a task
    // rounding it needs the whole sum).
    const StringRef steps = op.getBf16Steps().value_or("");
    const bool roundsOutput = steps == "hidden_and_output";
    if (roundsOutput && ks != 1)
      return op.emitOpError("rounds each expert's output (bf16_steps \"hidden_and_output\") "
                            "but its tiles are split ")
             << ks << " ways along the intermediate; it needs whole sums (ksplit 1)";
    // A wait in the prologue (schedule-prologue-waits) goes to the task,
    // which runs it once its weight copies are requested.
    const std::string wait = takePrologueWait();
    const bool waiting = !wait.empty();
    const std::string fn = std::string("moe_down_task") + (steps.empty() ? "" : "_bf16_steps") +
                           (waiting ? "_waiting" : "");
    std::string targs;
    if (waiting)
      targs = ", " + orderName(w) + (slice ? ", true" : ", false") + ", " + prologueWaitType;
    else if (!steps.empty())
      targs = ", " + orderName(w) + (slice ? ", true" : ", false");
    else
      targs = slice ? ", " + orderName(w) + ", true" : orderArgs(w, false);
    o << "      const int k0 = (r / " << tiles << ") * " << kslice
      << ", n0 = (r % " << tiles << ") * " << tn << ";\n"
      << "      mkgen::call<&mk::" << fn << "<" << T << ", " << tn << ", " << G << targs
      << ">>(" << sums << " + slot * " << 2 * m
      << ", " << m << ", "
      << tileArgs(w, m, d, tn, "e", "n0") << ", min(" << tn << ", " << d
      << " - n0), k0, k0 + " << kslice << ", "
      << (routed ? "tk_w[slot]" : "1.f") << ", " << ptr(op.getAcc(), true)
      << ", " << (tileOf(w) ? "n0" : "0") << ", work"
      << (waiting ? ", " + wait : std::string())
      << (steps.empty() ? "" : roundsOutput ? ", true" : ", false") << ");\n";
  }
  return success();
}

/// The instance's k-slice and columns (k0, k1, seg, n0, nvalid) from `i`.
void Emitter::emitGemvSlice(TaskOpInterface t, llvm::raw_ostream &o) {
  auto weights = t.getStrArrayArg("weights");
  auto ns = t.getIntArrayArg("n");
  int64_t k = t.getIntArg("k"), tn = t.getIntArg("tn"), ks = t.getIntArg("ksplit"),
          tiles = t.getIntArg("tiles"), unitCols = t.getIntArg("unit_cols");
  int64_t kslice = k / ks;
  o << "      const int k0 = " << (ks > 1 ? "(i / " + std::to_string(tiles) +
                                             ") * " + std::to_string(kslice)
                                       : std::string("0"))
    << ", k1 = k0 + " << kslice << ";\n";
  if (unitCols) {
    int64_t tpu = unitCols / tn, per = (int64_t)weights.size() * tpu;
    o << "      const int u = i / " << per << ", r = i % " << per
      << ", seg = r / " << tpu << ";\n"
      << "      const int n0 = u * " << unitCols << " + (r % " << tpu
      << ") * " << tn << ", nvalid = " << tn << ";\n";
  } else {
    o << "      const int tile = i % " << tiles << ";\n"
      << "      int seg = 0, n0 = tile * " << tn << ";\n";
    int64_t acc = 0;
    for (size_t s = 0; s + 1 < ns.size(); ++s) {
      acc += (ns[s] + tn - 1) / tn;
      o << "      if (tile >= " << acc << ") { seg = " << s + 1
        << "; n0 = (tile - " << acc << ") * " << tn << "; }\n";
    }
    o << "      const int nseg = ";
    for (size_t s = 0; s + 1 < ns.size(); ++s)
      o << "seg == " << s << " ? " << ns[s] << " : ";
    o << ns.back() << ";\n      const int nvalid = min(" << tn
      << ", nseg - n0);\n";
  }
}

/// Whether every weight of GEMV task `t` is stored in a packed order, tile
/// by tile at the task's tile width (what w4a16_gemv_begin and the L2
/// request of a first instance address).
bool Emitter::allPackedTiles(TaskOpInterface t) {
  auto weights = t.getStrArrayArg("weights");
  const int64_t tn = t.getIntArg("tn");
  return !weights.empty() && t.getIntArrayArg("n").size() == weights.size() &&
         llvm::all_of(weights, [&](const std::string &w) { return isTilePacked(w, tn); });
}

/// Opens `if (block's first instance of the phase is one of t's) // what`
/// for a task whose instances start at phase index `first`; the emitted
/// body reads it as `first`.
void Emitter::emitFirstInstanceGuard(TaskOpInterface t, int64_t first, int64_t dealOffset,
                                     llvm::StringRef what) {
  os << "    if (const int first = mk::deal_first_task(" << dealOffset << "u); "
     << (first ? "first >= " + std::to_string(first) + " && " : "") << "first < "
     << first + t.getCount() << ") // " << t.getName() << ": " << what << "\n";
}

/// For a task of packed W4A16 tiles whose instances start at phase index
/// `first`: block b in [first, first + count) starts the weight stream of
/// instance b - first, its first of the phase, at the phase's entry
/// (w4a16_gemv_begin), before the every-block norm and the counter waits;
/// that instance's tile continues it (prefetched = true).
bool Emitter::emitGemvBegin(TaskOpInterface t, int64_t first, int64_t dealOffset) {
  if (t.getTaskKind() != mk::schedule::TaskKind::W4A16Gemv)
    return false;
  auto weights = t.getStrArrayArg("weights");
  const int64_t k = t.getIntArg("k"), tn = t.getIntArg("tn"), ks = t.getIntArg("ksplit");
  const int64_t kslice = k / ks;
  if (!allPackedTiles(t))
    return false;
  const bool shared = buffers.lookup(t.getStrArg("input")).getSpace() == "shared";
  // Out of line (its index arithmetic would otherwise add to the kernel
  // body's registers): mkgen::begin<n>(each weight's w_q, scales and
  // zeros, work).
  const std::string fn = "begin" + std::to_string(beginCount++);
  llvm::raw_string_ostream h(helpers);
  h << "/// " << t.getName() << ": starts the weight stream of this block's first\n"
    << "/// instance (w4a16_gemv_begin).\n"
    << "__device__ __noinline__ void " << fn << "(int i, ";
  for (size_t s = 0; s < weights.size(); ++s)
    h << "const uint8_t *w" << s << ", const mk::bf16 *s" << s << ", const mk::bf16 *z" << s
      << ", ";
  h << "float *work) {\n";
  emitGemvSlice(t, h);
  h << "      float *red = work" << (shared ? "" : " + " + std::to_string(kslice)) << ";\n"
    << "      switch (seg) {\n";
  for (size_t s = 0; s < weights.size(); ++s) {
    const std::string n = std::to_string(s);
    h << "      case " << s << ": mk::w4a16_gemv_begin<" << T << ", " << tn << ", "
      << weightGroup(weights[s]) << orderArgs(weights[s], false) << ">("
      << tileArgParts("w" + n, "s" + n, "z" + n, /*tiled=*/true, k, tn, tn, "", "n0",
                      weightGroup(weights[s]))
             .joined()
      << ", nvalid, k0, k1, red); break;\n";
  }
  h << "      }\n}\n";
  emitFirstInstanceGuard(t, first, dealOffset, "start the block's first instance's weight stream");
  os << "      mkgen::" << fn << "(first - " << first << ", ";
  for (const std::string &w : weights)
    os << wq(w) << ", " << ws_(w) << ", " << wz(w) << ", ";
  os << "work);\n";
  return true;
}

/// For a task whose instances start at phase index `first`: block b in
/// [first, first + count) asks L2 for the weights of instance b - first,
/// its first of the phase, at the phase's entry (one bulk prefetch by
/// thread 0 per weight range): a packed GEMV tile's contiguous k-slice
/// ([k0/2 * tn, k1/2 * tn) bytes of its tile), a bf16-row task's rows, or
/// a KDA gated-delta task's state slice and conv parameters
/// (kda_head_chunk_l2_prefetch). Other kinds and storages ask for nothing
/// (false).
bool Emitter::emitL2FirstTask(TaskOpInterface t, int64_t first, int64_t dealOffset) {
  const std::optional<mk::schedule::TaskKind> kind = t.getTaskKind();
  if (!kind)
    return false;
  auto guard = [&](const char *what) { emitFirstInstanceGuard(t, first, dealOffset, what); };
  if (*kind == mk::schedule::TaskKind::Bf16Rows) {
    const int64_t rpt = t.getIntArg("rows_per_task"), rows = t.getIntArg("rows"),
                  k = t.getIntArg("k");
    guard("the block's first instance's weights into L2");
    os << "      mk::l2_prefetch_range(" << ident(t.getStrArg("weight")) << " + (size_t)(first - "
       << first << ") * " << rpt * k << ", unsigned(min(" << rpt << ", " << rows
       << " - (first - " << first << ") * " << rpt << ")) * " << 2 * k << "u);\n";
    return true;
  }
  if (*kind == mk::schedule::TaskKind::KdaHeadChunk) {
    const int64_t dk = t.getIntArg("head_dim"), chunk = t.getIntArg("chunk"),
                  conv = t.getIntArg("conv");
    guard("the block's first instance's state and conv parameters into L2");
    os << "      mkgen::call<&mk::kda_head_chunk_l2_prefetch<" << dk << ", " << chunk << ", "
       << conv << ">>(first - " << first << ", " << t.getIntArg("heads") * dk << ", "
       << ident(t.getStrArg("conv_w")) << ", " << ptr(t.getStrArg("cq")) << ", "
       << ptr(t.getStrArg("ck")) << ", " << ptr(t.getStrArg("cv")) << ", "
       << ptr(t.getStrArg("S")) << ");\n";
    return true;
  }
  if (*kind != mk::schedule::TaskKind::W4A16Gemv || !allPackedTiles(t))
    return false;
  auto weights = t.getStrArrayArg("weights");
  const int64_t k = t.getIntArg("k"), tn = t.getIntArg("tn");
  const std::string fn = "l2first" + std::to_string(beginCount++);
  llvm::raw_string_ostream h(helpers);
  h << "/// " << t.getName() << ": asks L2 for this block's first instance's\n"
    << "/// weights (l2_first_tasks).\n"
    << "__device__ __noinline__ void " << fn << "(int i";
  for (size_t s = 0; s < weights.size(); ++s)
    h << ", const uint8_t *w" << s;
  h << ") {\n";
  emitGemvSlice(t, h);
  h << "      (void)nvalid;\n      switch (seg) {\n";
  for (size_t s = 0; s < weights.size(); ++s)
    h << "      case " << s << ": mk::l2_prefetch_range(w" << s << " + (size_t)((n0) / " << tn
      << ") * " << k / 2 * tn << " + (size_t)(k0 / 2) * " << tn << ", unsigned((k1 - k0) / 2) * "
      << tn << "u); break;\n";
  h << "      }\n}\n";
  guard("the block's first instance's weights into L2");
  os << "      mkgen::" << fn << "(first - " << first;
  for (const std::string &w : weights)
    os << ", " << wq(w);
  os << ");\n";
  return true;
}

void Emitter::emitRoutedL2Requests(Operation *router, StringRef logits, llvm::raw_ostream &o) {
  auto phase = router->getParentOfType<PhaseOp>();
  if (!phase)
    return;
  for (Operation *n = phase->getNextNode(); n; n = n->getNextNode()) {
    auto later = dyn_cast<PhaseOp>(n);
    if (!later || !later.getL2RoutedTasks())
      continue;
    for (auto [t, at] : later.getGridTasks()) {
      auto down = dyn_cast<MoeDownOp>(t.getOperation());
      if (!down || down.getLogits().value_or("") != logits)
        continue;
      const std::string w = down.getDown().str();
      const int64_t d = int64_t(down.getHidden()), m = int64_t(down.getInter()),
                    tn = int64_t(down.getTn().value_or(0)),
                    ks = int64_t(down.getKsplit().value_or(0)),
                    tiles = int64_t(down.getTiles().value_or(0)), g = weightGroup(w);
      // Only tile-packed weights in k-slices of whole groups: each of the
      // three requests is then one contiguous range.
      if (!tn || !ks || !tiles || !isTilePacked(w, tn) || m % ks || (m / ks) % g)
        continue;
      const int64_t kslice = m / ks;
      const TileArgParts p = tileArgParts(w, m, d, tn, "e2", "n2");
      o << "        if (const int td = mk::deal_first_task(" << later.getDealOffset()
        << "u) - " << at << "; td >= 0 && td < " << t.getCount() << ") { // "
        << t.getName() << ": this block's first instance's weights into L2\n"
        << "          const int e2 = tk_idx[td / " << tiles * ks << "], r2 = td % " << tiles * ks
        << ";\n"
        << "          const int k2 = (r2 / " << tiles << ") * " << kslice << ", n2 = (r2 % "
        << tiles << ") * " << tn << ";\n"
        << "          mk::l2_prefetch_range(" << p.q << " + (size_t)(k2 / 2) * " << tn << ", "
        << kslice / 2 * tn << "u);\n";
      for (const std::string &sz : {p.s, p.z})
        o << "          mk::l2_prefetch_range(" << sz << " + (size_t)(k2 / " << g << ") * " << tn
          << ", " << kslice / g * tn * 2 << "u);\n";
      o << "        }\n";
    }
  }
}

namespace {
/// The emitter's lowering of task op OpT (Emitter::lowerTask), as the op's
/// TaskCudaLowering.
template <class OpT>
struct CudaLoweringModel
    : mk::emitter::TaskCudaLowering::ExternalModel<CudaLoweringModel<OpT>, OpT> {
  LogicalResult emitInstance(Operation *op, Emitter &emitter, int64_t group,
                             llvm::raw_ostream &os) const {
    return emitter.lowerTask(cast<OpT>(op), group, os);
  }
};

template <class... OpTs> void attachCudaLowerings(MLIRContext *ctx) {
  (OpTs::template attachInterface<CudaLoweringModel<OpTs>>(*ctx), ...);
}
} // namespace

void mk::emitter::registerTaskLoweringModels(DialectRegistry &registry) {
  // One model per task op with a device template; residual_rmsnorm is
  // emitted by its phase (every_block) and opaque has no lowering.
  registry.addExtension(+[](MLIRContext *ctx, ScheduleDialect *) {
    attachCudaLowerings<W4A16GemvOp, Bf16RowsOp, KdaHeadChunkOp, ConvCommitOp, ZeroF32Op,
                        FinalResidualOp, MlaRopeAppendOp, MlaQAbsorbOp, MlaAttentionChunkOp,
                        MlaCombineWvOp, MoeGateUpOp, MoeDownOp, GqaRopeAppendOp,
                        GqaAttentionChunkOp, GqaCombineOp, KdaGatedNormOp, ArgmaxOp>(ctx);
  });
}

#include "Emitter/TaskLoweringInterface.cpp.inc"
