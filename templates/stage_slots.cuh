//===- stage_slots.cuh - The task stages a StageClock times -------*- C++ -*-===//
//
// The stages (slots) a StageClock (phase_timing.cuh) attributes a task's
// cycles to, their names, and the bytes of a block's running sums. Plain
// C++: the kernels (NVRTC, as mk/stage_slots.cuh), mk-bench (which names
// the slots when it prints them) and the CUDA emitter (which bounds the
// timing build's static shared memory) all read this one list.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace mk {

/// Stages a StageClock attributes a task's cycles to.
enum StageSlot : int {
  kStageMlaPrologue = 0, ///< attention: queries staged, the first rows asked for (and, in
                         ///< the waiting form, the prologue wait, which the phase's wait
                         ///< table counts too)
  kStageMlaRowWait,      ///< attention: waiting for a sub-chunk's rows (+ barrier)
  kStageMlaScores,       ///< attention: scores of a sub-chunk (+ barrier)
  kStageMlaSoftmax,      ///< attention: softmax statistics (+ barrier)
  kStageMlaWeighted,     ///< attention: the weighted rows
  kStageMlaEpilogue,     ///< attention: the partials written
  kStageTileIssue,       ///< packed GEMV tile: entry to its weight copies issued (warp 0)
  kStageTileFirstData,   ///< packed GEMV tile: waiting for the first step's weights
  kStageTileSteps,       ///< packed GEMV tile: warp 0's steps
  kStageTileWarps,       ///< packed GEMV tile: waiting for the other warps
  kStageTileReduce,      ///< packed GEMV tile: cross-warp sums and the epilogue
  kStageTopk,            ///< the router's top-k (every block, once per MoE)
  kStageNorm,            ///< the every-block residual + RMSNorm
  kStageSignal,          ///< a task's counter signals (+ the barrier after)
  kStageNormLoads,       ///< the staged norm: its inputs' copies landed (+ barrier)
  kStageNormRest,        ///< the staged norm: sum of squares, scaling (+ barriers)
  kStageTopkLogits,      ///< of the router's top-k: its entry until every logit was read
                         ///< (a polled router's wait for them) and scored (+ barrier)
  kStageCombineEntry,    ///< MLA combine: entry until its wait for the partials returned
                         ///< (the W_v slice's first copies asked for before it)
  kStageCombineCopies,   ///< MLA combine: of the merge, the partials' copies issued (the
                         ///< first chunks' maxima and sums asked for before them)
  kStageCombineStats,    ///< MLA combine: of the merge, the chunks' maxima and sums loaded
                         ///< (+ barrier)
  kStageCombineWeights,  ///< MLA combine: of the merge, the chunk weights formed (warp 0)
  kStageCombineLanded,   ///< MLA combine: of the merge, waiting for the copied partials
                         ///< (+ barrier: the other warps' weights)
  kStageCombineMerge,    ///< MLA combine: of the merge, the weighted sums (+ barriers)
  kStageCombineGemv,     ///< MLA combine: the W_v slice's GEMV and its atomic adds
  kStageSlots
};

/// A block's running sums (phase_timing.cuh's StageSums: 8 bytes of cycles
/// and 4 of laps per slot, 8-aligned): what the emitter adds to a timing
/// build's static shared memory. An enumerator, not a constant: NVRTC would
/// emit a namespace-scope constant as a device symbol.
enum : int { kStageSumsBytes = (kStageSlots * 12 + 7) / 8 * 8 };

#ifndef __CUDACC__
/// The slots' names, in StageSlot's order (mk-bench's profile).
inline constexpr const char *kStageNames[] = {
    "mla attention: prologue (queries staged, first rows asked for; any prologue wait)",
    "mla attention: waiting for rows (+ barrier, next rows asked for)",
    "mla attention: scores (+ barrier)",
    "mla attention: softmax (+ barrier)",
    "mla attention: weighted rows",
    "mla attention: epilogue (partials written)",
    "packed gemv tile: entry to weight copies issued (warp 0)",
    "packed gemv tile: waiting for the first step's weights",
    "packed gemv tile: warp 0's steps",
    "packed gemv tile: waiting for the other warps",
    "packed gemv tile: cross-warp sums and epilogue",
    "router top-k (every block, once per MoE)",
    "every-block residual + rmsnorm",
    "counter signals (+ barrier)",
    "staged norm: its inputs landed (+ barrier)",
    "staged norm: sums and scaling (+ barriers)",
    "router top-k: of it, until every logit was read and scored (+ barrier)",
    "mla combine: entry until the partials' wait returned (W_v copies asked for)",
    "mla combine: merge's partial copies issued (first maxima and sums asked for)",
    "mla combine: merge's chunk maxima and sums loaded (+ barrier)",
    "mla combine: merge's chunk weights formed (warp 0)",
    "mla combine: merge's wait for the copied partials (+ barrier)",
    "mla combine: merge's weighted sums (+ barriers)",
    "mla combine: the W_v slice's gemv and atomic adds"};
static_assert(sizeof(kStageNames) / sizeof(kStageNames[0]) == kStageSlots,
              "a stage slot without a name, or a name without a slot");
#endif

} // namespace mk
