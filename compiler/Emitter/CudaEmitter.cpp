//===- CudaEmitter.cpp - schedule.kernel -> CUDA + manifest ---------------===//
//
// The kernel body follows the schedule op by op: a phase is a loop over its
// task instances (instance t runs on block t % gridDim.x, so any co-resident
// grid size works), each instance waiting on its counters, calling its
// template and signalling; a schedule.barrier is mk::grid_barrier. Counters
// are reset after the last barrier (one more ends the step where something
// waits after the schedule's last one). Shared memory: the normalized input of
// the current segment (xs), a reduction scratch, the norms' resident
// residual (resid: each every-block norm keeps its x there for the next
// one, whose base it is), and one work area sized for the hungriest task
// (in a kernel too wide for that, resid goes first, then the phases that do
// not need xs start their work area at it: planInputLending); the sizes are
// mirrored from the templates' constexpr helpers and checked against them
// with static_asserts in the emitted code.
//
//===----------------------------------------------------------------------===//

#include "Emitter/EmitterImpl.h"

#include "stage_slots.cuh"

using namespace mk::emitter::detail;

/// Which phases may lend the input vector's shared memory to their tasks'
/// work area: walking back from the last phase, xs is needed in a phase
/// that computes it (an every-block norm) or whose tasks read it (a buffer
/// argument in the "shared" space), and in every phase between such a
/// reader and the norm that computed its value; the other phases get it.
void Emitter::planInputLending() {
  bool carry = false; // a later phase reads the value xs holds here
  SmallVector<PhaseOp> phases(kernel.getBodyBlock().getOps<PhaseOp>());
  for (PhaseOp p : llvm::reverse(phases)) {
    bool norm = false, reads = false;
    for (TaskOpInterface t : p.getBodyBlock().getOps<TaskOpInterface>()) {
      norm |= t.isEveryBlock();
      // bf16-row and expert gate/up tasks are lowered reading xs whether
      // or not their optional `input` names it.
      reads |= isa<Bf16RowsOp, MoeGateUpOp>(t.getOperation());
      for (StringRef b : mk::schedule::taskAccesses(t).reads)
        if (BufferOp buf = buffers.lookup(b); buf && buf.getSpace() == "shared")
          reads = true;
    }
    if (!norm && !reads && !carry)
      inputLentPhases.insert(p.getOperation());
    carry = (reads || carry) && !norm;
  }
}

LogicalResult Emitter::emitPhase(PhaseOp phase) {
  os << "  // ---- phase \"" << phase.getName() << "\"\n"
     << "  MK_PHASE_MARK(" << phaseIndex++ << ");\n  {\n"
     << "    uint8_t *const wsp = mkgen::opaque(ws);\n";
  inLentPhase = inputLentPhases.contains(phase.getOperation());
  if (inLentPhase)
    os << "    // The input vector is dead here: the tasks' work area starts at it.\n"
       << "    float *const work = xs;\n    (void)work;\n";
  if (std::optional<ArrayAttr> pf = phase.getL2Prefetch()) {
    // Later phases' weights into L2 (schedule-prefetch-weights).
    for (Attribute a : *pf) {
      StringRef w = cast<StringAttr>(a).getValue();
      SmallVector<WeightOp> parts = weightTensors(w);
      if (parts.empty())
        return phase.emitOpError("l2_prefetch names '") << w << "', which is no weight of the kernel";
      for (WeightOp d : parts)
        os << "    mk::l2_prefetch_share(" << ident(d.getSymName()) << ", "
           << d.getSizeInBytes()
           << "u);\n";
    }
  }
  for (TaskOpInterface t : phase.getBodyBlock().getOps<TaskOpInterface>())
    if (failed(checkTaskArgs(t)))
      return failure();
  SmallVector<GridTask> grid = phase.getGridTasks();
  // Each block's first instance, if a packed tile, streams its weights from
  // the phase's entry, under the norm and the counter waits
  // (w4a16_gemv_begin). Where the phase's every-block norm takes the split
  // form (below), the streams are asked for between its loads and its
  // arithmetic instead, so that its loads do not queue behind them.
  begunTasks.clear();
  const size_t beginsAt = body.size();
  for (GridTask g : grid)
    if (!debug && (kernel.getEarlyWeightStreams() || phase.getEarlyWeightStreams()) &&
        emitGemvBegin(g.task, g.first, phase.getDealOffset()))
      begunTasks.insert(g.task.getName());
  std::string begins = body.substr(beginsAt);
  body.resize(beginsAt);
  // Whether a norm keeps its residual in shared memory (`resid`).
  auto residentNorm = [&](ResidualRmsnormOp norm) {
    return residentResidual && int64_t(norm.getDim()) == hidden;
  };
  // The split form (block_residual_rmsnorm_loads, the streams, then
  // block_residual_rmsnorm_rest_outlined) takes the every-block one-sum
  // norm rounded once with the resident residual; other norms load through
  // registers after streams begun before them (REG_LOADS).
  auto splitsAroundStreams = [&](ResidualRmsnormOp norm) {
    const std::optional<uint64_t> roundings = norm.getRoundings();
    return !begins.empty() && cast<TaskOpInterface>(norm.getOperation()).isEveryBlock() &&
           !twoSumNorms && !(roundings && *roundings == 2) && residentNorm(norm);
  };
  if (!llvm::any_of(phase.getBodyBlock().getOps<ResidualRmsnormOp>(), splitsAroundStreams)) {
    os << begins;
    begins.clear();
  }
  // Each block's first instances' weights into L2, before the norm (not
  // where early streams already request a first instance's weights).
  if (!debug && phase.getL2FirstTasks() && begunTasks.empty())
    for (GridTask g : grid)
      emitL2FirstTask(g.task, g.first, phase.getDealOffset());
  for (TaskOpInterface t : phase.getBodyBlock().getOps<TaskOpInterface>()) {
    if (!t.isEveryBlock())
      continue;
    auto norm = dyn_cast<ResidualRmsnormOp>(t.getOperation());
    if (!norm)
      return t.emitOpError("every_block tasks must be residual_rmsnorm");
    StringRef acc = norm.getAcc().value_or(""), acc2 = norm.getAcc2().value_or(""),
              out = norm.getOut().value_or("");
    if (!acc2.empty() && acc.empty())
      return norm.emitOpError("takes a second sum (acc2) without a first (acc)");
    const int64_t dim = int64_t(norm.getDim());
    const std::string accArg = acc.empty() ? "nullptr" : ptr(acc);
    const std::string outArg = out.empty() ? "nullptr" : ptr(out, true);
    const std::string eps = fmtFloat(norm.getEps().convertToDouble());
    os << "    // " << t.getName() << " (every block)\n"
       << "    __syncthreads();\n";
    // The norm's loads land in xs and `resid` (the resident residual:
    // with it, the base is what the block's previous norm left there when
    // it is that norm's residual, and x stays there for the next one).
    // `work` is passed, when no early weight stream fills it, for the
    // staged form (-DMK_NORM_STAGED) and, without the resident residual,
    // as where the base lands (the template's BASE_IN_STAGE).
    StringRef base = norm.getBase();
    const bool resident = residentNorm(norm);
    const bool residBase = resident && base == residHolds;
    residRead |= residBase;
    const bool passWork = begunTasks.empty();
    if (passWork) {
      workTask = t;
      needWork(2 * dim); // residual_rmsnorm_stage_bytes(dim) / 4
    }
    // Its template arguments past THREADS: BASE_IN_STAGE, REG_LOADS (with a
    // stream begun the norm's loads go through registers: a cp.async wait
    // would wait for the stream's groups too) and ROUND_TWICE, written up to
    // the last that is not its default.
    const std::optional<uint64_t> roundings = norm.getRoundings();
    if (roundings && *roundings != 1 && *roundings != 2)
      return norm.emitOpError("roundings must be 1 or 2, got ") << *roundings;
    const bool flags[] = {!resident && passWork, !passWork, roundings && *roundings == 2};
    std::string targs;
    for (int last = 2; last >= 0; --last)
      if (flags[last]) {
        for (int k = 0; k <= last; ++k)
          targs += flags[k] ? ", true" : ", false";
        break;
      }
    os << "    {\n    MK_STAGE_BEGIN();\n";
    if (!begins.empty() && splitsAroundStreams(norm)) {
      const std::string common = ptr(base) + ", " + accArg + ", " +
                                 ident(norm.getWeight()) + ", " + std::to_string(dim) + ", ";
      const std::string tail = std::string(", resid, ") + (residBase ? "true" : "false");
      os << "    const mk::NormLoads nl = mk::block_residual_rmsnorm_loads<" << T << ">("
         << common << "xs, " << outArg << tail << ");\n"
         << begins << "    mk::block_residual_rmsnorm_rest_outlined<" << T << ">(" << common
         << eps << ", xs, " << outArg << ", scratch" << tail << ", nl);\n";
      begins.clear();
    } else {
      os << "    mk::block_residual" << (twoSumNorms ? "2" : "") << "_rmsnorm_outlined<" << T
         << targs << ">(" << ptr(base) << ", " << accArg
         << (twoSumNorms ? ", " + (acc2.empty() ? std::string("nullptr") : ptr(acc2)) : "")
         << ", " << ident(norm.getWeight()) << ", " << dim << ", " << eps << ", xs, "
         << outArg << ", scratch, " << (passWork ? "work" : "nullptr") << ", "
         << (resident ? "resid" : "nullptr") << ", " << (residBase ? "true" : "false")
         << ");\n";
    }
    os << "    MK_STAGE_END(mk::kStageNorm);\n    }\n";
    // A norm without an accumulator leaves its base as the residual.
    residHolds = resident ? (out.empty() ? base : out).str() : "";
    auto cap = smemCapture.find(t.getName());
    if (debug && cap != smemCapture.end()) {
      const Capture &c = captures[captureIndex.lookup(cap->second)];
      os << "    if (blockIdx.x == 0) // debug capture " << c.name << "\n"
         << "      mk::debug_store_smem(xs, " << dim
         << ", reinterpret_cast<mk::bf16 *>(debug + " << c.offset << "));\n";
    }
  }
  // (Empty: a split norm took them.)
  os << begins;
  if (const int64_t total = phase.getNumGridInstances()) {
    // The phase's waits and signals by task, in their order (a scan of the
    // phase per task was quadratic in phase 0's zeroing tasks).
    llvm::StringMap<SmallVector<WaitOp, 2>> waitsOf;
    llvm::StringMap<SmallVector<SignalOp, 2>> signalsOf;
    for (Operation &op : phase.getBodyBlock()) {
      if (auto w = dyn_cast<WaitOp>(op))
        waitsOf[w.getTask()].push_back(w);
      else if (auto s = dyn_cast<SignalOp>(op))
        signalsOf[s.getTask()].push_back(s);
    }
    // Instance t runs on block (t + deal_offset) % gridDim.x; t0 is the
    // block's first.
    os << "    const int t0 = mk::deal_first_task(" << phase.getDealOffset() << "u);\n"
       << "    for (int t = t0; t < " << total << "; t += gridDim.x) {\n";
    for (GridTask g : grid) {
      TaskOpInterface t = g.task;
      const int64_t begin = g.first, end = begin + t.getCount();
      os << "      if (t < " << end << ") { // " << t.getName() << "\n"
         << "      const int i = t - " << begin << ";\n";
      bool waits = false;
      prologueWait.clear();
      prologueWaitCounter.clear();
      SmallVector<std::string, 2> inPrologue;
      for (WaitOp w : waitsOf.lookup(t.getName())) {
        CounterOp c = counters.lookup(w.getCounter());
        if (w.getInPrologue()) { // the task's lowering passes it on
          prologueWaitCounter = w.getCounter().str();
          inPrologue.push_back(
              llvm::formatv("mk::CounterWaits{{sync, {0} + (i / {1}) * {2}, {2}, {3}u "
                            "MK_PROLOGUE_WAIT_TIMED({4})}",
                            c.getBase(), w.getDivisor(), w.getSpan(), w.getTarget(),
                            phaseIndex - 1)
                  .str());
          continue;
        }
        if (!waits)
          os << "      MK_WAIT_BEGIN();\n";
        waits = true;
        os << "      for (int q = 0; q < " << w.getSpan() << "; ++q)\n"
           << "        mk::counter_wait(sync, " << c.getBase() << " + (i / "
           << w.getDivisor() << ") * " << w.getSpan() << " + q, "
           << w.getTarget() << "u);\n";
      }
      if (waits)
        os << "      MK_WAIT_END(" << phaseIndex - 1 << ");\n";
      // One prologue wait, or two run as one (the verifier allows no more).
      prologueWaitType = "mk::CounterWaits";
      if (inPrologue.size() == 1) {
        prologueWait = inPrologue[0];
      } else if (inPrologue.size() == 2) {
        prologueWaitType = "mk::BothWaits<mk::CounterWaits, mk::CounterWaits>";
        prologueWait = prologueWaitType + "{" + inPrologue[0] + ", " + inPrologue[1] + "}";
      } else if (inPrologue.size() > 2) {
        return t.emitOpError("has ") << inPrologue.size() << " prologue waits (at most two)";
      }
      std::string inst;
      llvm::raw_string_ostream is(inst);
      workTask = t;
      if (failed(emitInstance(t, is)))
        return failure();
      // A lowering that runs a prologue wait takes it (takePrologueWait);
      // one left means the kind's lowering would drop the wait.
      if (!prologueWait.empty())
        return t.emitOpError("waits for @")
               << prologueWaitCounter
               << " in its prologue, which its kind's lowering does not run";
      os << "      {\n" << inst << "      }\n";
      // The task's signals (two at a time share one release fence); their
      // block barrier frees its shared memory for the block's next task,
      // which a task without signals gets from a block barrier of its own.
      os << "      {\n      MK_STAGE_BEGIN();\n";
      SmallVector<std::string> sigs;
      for (SignalOp s : signalsOf.lookup(t.getName())) {
        CounterOp c = counters.lookup(s.getCounter());
        sigs.push_back(llvm::formatv("{0} + i / {1}", c.getBase(), s.getDivisor()).str());
      }
      for (size_t j = 0; j < sigs.size(); j += 2) {
        if (j + 1 < sigs.size())
          os << "      mk::counter_signal2(sync, " << sigs[j] << ", " << sigs[j + 1] << ");\n";
        else
          os << "      mk::counter_signal(sync, " << sigs[j] << ");\n";
      }
      os << (sigs.empty() ? "      __syncthreads();\n" : "      mk::counter_signal_tail();\n")
         << "      MK_STAGE_END(mk::kStageSignal);\n      }\n"
         << "      continue;\n      }\n";
    }
    os << "    }\n";
  }
  os << "    MK_PHASE_DONE(" << phaseIndex - 1 << ");\n  }\n";
  return success();
}

LogicalResult Emitter::run(EmittedKernel &out) {
  for (BufferOp b : kernel.getBodyBlock().getOps<BufferOp>()) {
    buffers[b.getSymName()] = b;
    if (b.isWorkspace() && (int64_t)b.getOffset() < 0)
      return b.emitOpError("has no workspace offset; run "
                           "schedule-plan-workspace first");
  }
  for (WeightOp w : kernel.getBodyBlock().getOps<WeightOp>()) {
    weights.push_back(w);
    weightByName[w.getSymName()] = w;
  }
  for (BufferOp b : kernel.getBodyBlock().getOps<BufferOp>())
    if (b.getSpace() == "state")
      stateBuffers.push_back(b);
  BufferOp in = buffers.lookup("hidden_in");
  if (!in || in.getSpace() != "io" || in.getShape().size() != 1)
    return kernel.emitOpError("has no io buffer @hidden_in of rank 1 (the block's input)");
  hidden = in.getShape()[0];
  // The routers' top-k (the moe tasks' `top_k`): the shared top-k arrays' size.
  kernel.walk([&](TaskOpInterface t) { topK = std::max(topK, t.getIntArg("top_k", 0)); });
  kernel.walk([&](ResidualRmsnormOp n) { twoSumNorms |= n.getAcc2().has_value(); });
  for (CounterOp c : kernel.getBodyBlock().getOps<CounterOp>()) {
    counters[c.getSymName()] = c;
    if ((int64_t)c.getBase() < 0)
      return c.emitOpError("has no base index; run schedule-plan-workspace");
    numCounters = std::max<int64_t>(numCounters, c.getBase() + c.getSize());
  }
  // Counters are reset after the last barrier: where something waits after
  // it (the whole model's argmax after its LM head, unless
  // schedule-fuse-argmax merged it into the tiles), or there is none, one
  // more grid barrier ends the step before the reset.
  bool afterLast = true;
  for (Operation &op : llvm::reverse(kernel.getBodyBlock())) {
    if (isa<BarrierOp>(op))
      break;
    if (auto p = dyn_cast<PhaseOp>(op))
      if (!p.getBodyBlock().getOps<WaitOp>().empty())
        afterLast = false;
  }
  resetBarrier = numCounters && (!afterLast || kernel.getNumBarriers() == 0);
  if (lendInput)
    planInputLending();
  debug = kernel.getDebugCapture();
  if (debug && failed(planCaptures()))
    return failure();
  // Only one shared-memory buffer (the normalized input) can be live at once:
  // a segment holds at most one every-block norm.
  for (Operation &op : kernel.getBodyBlock()) {
    if (auto p = dyn_cast<PhaseOp>(op)) {
      if (failed(emitPhase(p)))
        return failure();
    } else if (isa<BarrierOp>(op)) {
      os << "  mk::grid_barrier(sync);\n";
    }
  }
  if (resetBarrier)
    os << "  mk::grid_barrier(sync); // every wait is done: the counters may be reset\n";
  if (numCounters)
    os << "  mk::counters_reset(sync, " << numCounters << ");\n";
  os << "  MK_PHASE_MARK(" << phaseIndex << ");\n";
  if (debug) {
    // Every value of the step is final once all blocks are here; workspace
    // buffers were planned without reuse, so each still holds its value.
    os << "  // ---- debug captures (debug_capture kernels only)\n"
       << "  mk::grid_barrier(sync);\n  {\n"
       << "    uint8_t *const wsp = mkgen::opaque(ws);\n";
    for (const Capture &c : captures)
      if (c.fill) {
        os << "    // " << c.name << "\n";
        c.fill(os, "debug + " + std::to_string(c.offset));
      }
    os << "  }\n";
  }

  int64_t d4 = (hidden + 3) / 4 * 4;
  // The resident residual: hidden bf16, in whole 16-byte pieces.
  const int64_t residFloats = residRead ? (hidden + 7) / 8 * 4 : 0;
  int64_t smemFloats = std::max(d4 + 32 + residFloats + (workFloats + 3) / 4 * 4,
                                (lentWorkFloats + 3) / 4 * 4);
  int64_t dynSmem = smemFloats * 4;
  // Static shared memory of the kernel body and templates on top, bounded
  // from what the kernel calls: the grid barrier's generation word and
  // alignment (128 B), the timing builds' stage sums (kStageSumsBytes:
  // the same source with -DMK_PHASE_TIMING must fit too), the packed tiles' mbarriers (8 per
  // warp) and each router top-k and bf16-rows instantiation's arrays
  // (needStaticShared). Past the device's limit the session refuses the
  // kernel at load, naming its dynamic and static bytes (Session::create).
  // The stage sums' bytes are stage_slots.cuh's, which phase_timing.cuh's
  // StageSums static_asserts that it fits.
  int64_t staticSharedBound = 128 + mk::kStageSumsBytes + 64 * (T / 32);
  for (const auto &entry : staticShared)
    staticSharedBound += entry.getValue();
  if (int64_t limit = kernel.getMaxSharedBytes();
      limit > 0 && dynSmem + staticSharedBound > limit) {
    overShared = true;
    auto diag = mlir::emitError(kernel.getLoc(), "kernel @")
                << kernel.getSymName() << " needs " << dynSmem
                << " B of dynamic shared memory per block (+ up to " << staticSharedBound
                << " B static), more than the target's " << limit
                << " B (schedule-form-phases max-shared-bytes: sm_120 allows 101376, sm_90 "
                   "232448): the input vector takes "
                << d4 * 4 << " B, the largest task's work area " << workFloats * 4 << " B";
    if (ringStages < kDefaultRingStages)
      diag << " with a " << ringStages << "-stage GEMV weight ring";
    if (workOwner)
      diag << " (task \"" << workOwner.getName() << "\", "
           << taskKindName(workOwner.getKind()) << ")";
    if (residFloats)
      diag << " and the resident residual " << residFloats * 4 << " B";
    if (lendInput && lentWorkOwner)
      diag << "; the phases that do not read the input vector lend its space to their work "
              "area, the largest "
           << lentWorkFloats * 4 << " B (task \"" << lentWorkOwner.getName() << "\", "
           << taskKindName(lentWorkOwner.getKind()) << ")";
    return diag;
  }
  // Mirrors mk::sync_bytes (grid_sync.cuh): barrier words, one arrival
  // flag per block (kMaxGrid of them), then the counters.
  int64_t syncBytes = (64 + kMaxGrid + 32 * std::max<int64_t>(numCounters, 1)) * 4;

  std::string src;
  llvm::raw_string_ostream k(src);
  k << "// Generated by mkc from the schedule of @" << kernel.getSymName()
    << ": " << kernel.getNumPhases() << " phases, "
    << kernel.getNumBarriers() << " grid barriers, " << numCounters
    << " counters. Do not edit.\n"
    << "// NVRTC has no <math.h>; the templates use INFINITY.\n"
    << "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n"
    << "#endif\n";
  if (ringStages != kDefaultRingStages)
    k << "// A " << ringStages << "-stage GEMV weight ring: the default 3 does not fit the "
      << "target's shared memory.\n#define MK_W4A16_STAGES " << ringStages << "\n";
  // The grouped packed tiles' stages asked for up front (tile_stages_ahead;
  // 0: the whole ring). Defined unconditionally, so that the IR decides: an
  // NVRTC -DMK_GEMV_AHEAD_STAGES is overridden (with a redefinition
  // warning); the pass option sets it.
  const auto stagesAhead = static_cast<int64_t>(kernel.getTileStagesAhead());
  const int64_t ahead = stagesAhead > 0 ? std::min<int64_t>(stagesAhead, ringStages) : ringStages;
  k << "// Of the ring, the stages a grouped packed GEMV tile asks for before its first step.\n"
    << "#define MK_GEMV_AHEAD_STAGES " << ahead << "\n";
  k << "#include \"mk/megakernel.cuh\"\n"
    << (debug ? "#include \"mk/debug_capture.cuh\"\n" : "") << "\n"
    << "// Compiled with -DMK_PHASE_TIMING, every block records the global\n"
    << "// timer (ns) as it enters each phase (and at the end), its counter\n"
    << "// waits and when its tasks of the phase are done, and the task stages\n"
    << "// its StageClocks summed so far (phase_timing.cuh).\n"
    << "#ifdef MK_PHASE_TIMING\n"
    << "__device__ unsigned long long mk_phase_ns[" << kernel.getNumPhases() + 1
    << " * mk::kMaxGrid];\n"
    << "__device__ unsigned long long mk_phase_wait_ns["
    << kernel.getNumPhases() + 1 << " * mk::kMaxGrid];\n"
    << "__device__ unsigned long long mk_phase_done_ns["
    << kernel.getNumPhases() << " * mk::kMaxGrid];\n"
    << "__device__ unsigned long long mk_stage_cycles[" << kernel.getNumPhases() + 1
    << " * mk::kStageSlots * mk::kMaxGrid];\n"
    << "__device__ unsigned mk_stage_laps[" << kernel.getNumPhases() + 1
    << " * mk::kStageSlots * mk::kMaxGrid];\n"
    << "#define MK_PHASE_MARK(i) mk::phase_enter(mk_phase_ns, mk_phase_wait_ns, "
       "mk_stage_cycles, mk_stage_laps, i)\n"
    << "#define MK_PHASE_DONE(i) mk::phase_stamp(mk_phase_done_ns, i)\n"
    << "#define MK_WAIT_BEGIN() const unsigned long long mk_wait0 = "
       "mk::global_timer_ns()\n"
    << "#define MK_WAIT_END(i) mk::phase_add(mk_phase_wait_ns, i, "
       "mk::global_timer_ns() - mk_wait0)\n"
    << "#define MK_PROLOGUE_WAIT_TIMED(i) , mk_phase_wait_ns, i\n"
    << "#define MK_STAGE_BEGIN() mk::StageClock mk_stage_clock\n"
    << "#define MK_STAGE_END(s) mk_stage_clock.lap(s)\n"
    << "#else\n#define MK_PHASE_MARK(i) ((void)0)\n"
    << "#define MK_PHASE_DONE(i) ((void)0)\n"
    << "#define MK_WAIT_BEGIN() ((void)0)\n"
    << "#define MK_WAIT_END(i) ((void)0)\n"
    << "#define MK_PROLOGUE_WAIT_TIMED(i)\n"
    << "#define MK_STAGE_BEGIN() ((void)0)\n"
    << "#define MK_STAGE_END(s) ((void)0)\n#endif\n\n"
    << "namespace mkgen {\n"
    << "/// Keeps a template's registers out of the kernel body's allocation.\n"
    << "template <auto F, class... A>\n"
    << "__device__ __noinline__ void call(A... a) { F(a...); }\n"
    << "/// The workspace base, re-read per phase: addresses derived from it\n"
    << "/// are not hoisted to the kernel's start (where they would all be live\n"
    << "/// at once and spill).\n"
    << "__device__ __forceinline__ uint8_t *opaque(uint8_t *p) {\n"
    << "  asm volatile(\"\" : \"+l\"(p));\n  return p;\n}\n"
    << helpers << "} // namespace mkgen\n\n";
  for (const std::string &a : asserts)
    k << "static_assert(" << a << ", \"shared-memory layout of a template "
      << "changed: the emitter's mirror is stale\");\n";
  k << "static_assert(mk::sync_bytes(" << numCounters << ") == " << syncBytes
    << ", \"sync layout changed\");\n\n";
  // Blocks per SM the shared memory allows (Hopper: 227 KB per SM, 1 KB
  // reserved per block), capped at 2 so each thread keeps >= 128 registers.
  // Telling ptxas the target occupancy lets it allocate for it instead of
  // spilling around the template calls.
  const int64_t minBlocks =
      std::clamp<int64_t>(232448 / (dynSmem + 1024), 1, 2);
  k << "extern \"C\" __global__ void __launch_bounds__(" << T << ", "
    << minBlocks << ") "
    << kernel.getSymName() << "(\n";
  // A block's input and output hidden, or the whole model's token id and
  // next token.
  if (kernel.getEmbedding())
    k << "    const int token, int *__restrict__ next_token";
  else
    k << "    const mk::bf16 *__restrict__ hidden_in, mk::bf16 *hidden_out";
  for (WeightOp w : weights)
    k << ",\n    const " << ctypeOf(w.getDtype()) << " *__restrict__ " << ident(w.getSymName());
  for (BufferOp st : stateBuffers)
    k << ",\n    const " << ctypeOf(st.getDtype()) << " *" << ident(st.getSymName())
      << "_in, " << ctypeOf(st.getDtype()) << " *" << ident(st.getSymName()) << "_out";
  k << ",\n    const int ctx_len, const int cache_capacity,\n"
    << "    uint8_t *__restrict__ ws, unsigned *sync";
  if (kernel.getDebugCapture())
    k << ", uint8_t *debug";
  k << ") {\n";
  if (std::optional<StringRef> e = kernel.getEmbedding())
    k << "  // The whole model's input: the token's embedding row (the runtime checks\n"
      << "  // 0 <= token < vocab).\n"
      << "  const mk::bf16 *const hidden_in = " << ident(*e) << " + (size_t)token * " << hidden
      << ";\n";
  k << "  extern __shared__ __align__(16) float mk_smem[];\n"
    << "  float *const xs = mk_smem;            // normalized input ["
    << hidden << "]\n"
    << "  float *const scratch = xs + " << d4 << ";    // reductions [32]\n";
  if (residFloats)
    k << "  mk::bf16 *const resid = reinterpret_cast<mk::bf16 *>(scratch + 32); // residual ["
      << hidden << "]\n";
  else
    k << "  mk::bf16 *const resid = nullptr; // no norm reads a resident residual\n";
  k << "  float *const work = scratch + " << 32 + residFloats << ";     // per-task ["
    << workFloats << "]\n";
  // The routers' top-k, where a routed MoE reads one.
  if (topK > 0)
    k << "  __shared__ float tk_w[" << topK << "];\n"
      << "  __shared__ int tk_idx[" << topK << "];\n"
      << "  int tk_key = -1; // which router's top-k tk_* hold\n";
  k << "  (void)cache_capacity; " << (topK > 0 ? "(void)tk_key; " : "")
    << "(void)work; (void)scratch; (void)resid;\n"
    << body << "}\n";
  out.name = kernel.getSymName().str();
  out.source = src;
  out.dynamicSharedBytes = dynSmem;
  out.manifest = manifest(dynSmem, syncBytes);
  return success();
}


LogicalResult mk::emitter::emitKernel(KernelOp kernel, EmittedKernel &out) {
  // A kernel that does not fit the target's shared memory with the GEMV
  // tiles' default 3-stage weight ring (a wide model: the input vector and
  // the staged slices grow with the width) is emitted with 2 stages, which
  // the source then defines, and if that does not fit either, with the
  // input vector's space lent to the work area of the phases that do not
  // read it (planInputLending); only if that does not fit either is it an
  // error (also with the integer tiles, which need 3). The first attempts'
  // errors are held back (the loud rerun reports them); anything else
  // passes through.
  int64_t stages = Emitter::kDefaultRingStages;
  bool lend = false;
  {
    mlir::ScopedDiagnosticHandler quiet(kernel.getContext(), [](mlir::Diagnostic &d) {
      return success(d.getSeverity() == mlir::DiagnosticSeverity::Error);
    });
    Emitter first(kernel, stages);
    if (succeeded(first.run(out)))
      return success();
    // Without the norms' resident residual first (a few KB).
    if (first.overSharedLimit()) {
      Emitter plain(kernel, stages, /*lendInput=*/false, /*residentResidual=*/false);
      if (succeeded(plain.run(out)))
        return success();
    }
    // The integer tile needs the 3-stage ring (its quantized x lives behind
    // the ring slices, w4a16_gemv.cuh).
    bool integerTiles = llvm::any_of(kernel.getBodyBlock().getOps<WeightOp>(),
                                     [](WeightOp w) { return w.getOrder() == "int8"; });
    if (first.overSharedLimit() && !integerTiles) {
      stages = 2;
      Emitter second(kernel, stages, /*lendInput=*/false, /*residentResidual=*/false);
      if (succeeded(second.run(out)))
        return success();
      // Still too wide (the input vector beside the largest work area):
      // the phases that do not read the input vector lend its space.
      if (second.overSharedLimit()) {
        lend = true;
        if (succeeded(Emitter(kernel, stages, lend).run(out)))
          return success();
      }
    }
  }
  // Again, reporting its errors (the resident residual only at full stages).
  return Emitter(kernel, stages, lend, stages == Emitter::kDefaultRingStages).run(out);
}

LogicalResult mk::emitter::emitModule(ModuleOp module, EmittedKernel &out) {
  auto kernels = module.getOps<KernelOp>();
  if (llvm::range_size(kernels) != 1)
    return module.emitError("expected exactly one schedule.kernel, found ")
           << llvm::range_size(kernels);
  return emitKernel(*kernels.begin(), out);
}
