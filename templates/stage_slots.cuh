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

/// The stages a StageClock attributes a task's cycles to, in slot order:
/// X(slot, name), the name mk-bench prints. One list, so that a slot and
/// its name cannot drift apart; StageSlot and kStageNames are made from it.
#define MK_STAGE_SLOT_LIST(X)                                                                  \
  /* attention: queries staged, the first rows asked for (and, in the waiting */               \
  /* form, the prologue wait, which the phase's wait table counts too) */                      \
  X(kStageMlaPrologue,                                                                         \
    "mla attention: prologue (queries staged, first rows asked for; any prologue wait)")       \
  X(kStageMlaRowWait, "mla attention: waiting for rows (+ barrier, next rows asked for)")      \
  X(kStageMlaScores, "mla attention: scores (+ barrier)")                                      \
  X(kStageMlaSoftmax, "mla attention: softmax (+ barrier)")                                    \
  X(kStageMlaWeighted, "mla attention: weighted rows")                                         \
  X(kStageMlaEpilogue, "mla attention: epilogue (partials written)")                           \
  X(kStageTileIssue, "packed gemv tile: entry to weight copies issued (warp 0)")               \
  X(kStageTileFirstData, "packed gemv tile: waiting for the first step's weights")             \
  X(kStageTileSteps, "packed gemv tile: warp 0's steps")                                       \
  X(kStageTileWarps, "packed gemv tile: waiting for the other warps")                          \
  X(kStageTileReduce, "packed gemv tile: cross-warp sums and epilogue")                        \
  X(kStageTopk, "router top-k (every block, once per MoE)")                                    \
  X(kStageNorm, "every-block residual + rmsnorm")                                              \
  X(kStageSignal, "counter signals (+ barrier)")                                               \
  X(kStageNormLoads, "staged norm: its inputs landed (+ barrier)")                             \
  X(kStageNormRest, "staged norm: sums and scaling (+ barriers)")                              \
  /* of the router's top-k: a polled router's wait for its logits included */                  \
  X(kStageTopkLogits, "router top-k: of it, until every logit was read and scored (+ barrier)") \
  X(kStageCombineEntry,                                                                        \
    "mla combine: entry until the partials' wait returned (W_v copies asked for)")             \
  /* the merge's stages, in its order */                                                       \
  X(kStageCombineCopies, "mla combine: merge's partial copies issued")                         \
  X(kStageCombineStats, "mla combine: merge's chunk maxima and sums loaded (+ barrier)")       \
  X(kStageCombineWeights, "mla combine: merge's chunk weights formed (warp 0)")                \
  /* the wait for the copies, and the barrier after it, which also waits */                   \
  /* for warp 0's chunk weights */                                                             \
  X(kStageCombineLanded, "mla combine: merge's wait for the copied partials (+ barrier)")      \
  X(kStageCombineMerge, "mla combine: merge's weighted sums (+ barriers)")                     \
  X(kStageCombineGemv, "mla combine: the W_v slice's gemv and atomic adds")

/// Stages a StageClock attributes a task's cycles to (MK_STAGE_SLOT_LIST's
/// order), then their count.
enum StageSlot : int {
#define MK_STAGE_SLOT_ENUMERATOR(slot, name) slot,
  MK_STAGE_SLOT_LIST(MK_STAGE_SLOT_ENUMERATOR)
#undef MK_STAGE_SLOT_ENUMERATOR
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
#define MK_STAGE_SLOT_NAME(slot, name) name,
    MK_STAGE_SLOT_LIST(MK_STAGE_SLOT_NAME)
#undef MK_STAGE_SLOT_NAME
};
static_assert(sizeof(kStageNames) / sizeof(kStageNames[0]) == kStageSlots,
              "MK_STAGE_SLOT_LIST makes one name per slot");
#endif
#undef MK_STAGE_SLOT_LIST

} // namespace mk
