//===- ScheduleAttrs.td - Attributes of the schedule dialect -*- tablegen -*-===//
//
// The task kind: which device template a task's instances call (each kind
// is its own op, `schedule.<keyword>`, ScheduleOps.td; the enum names them
// in the registry and the passes). Per kind, the arguments a task carries
// are in the registry
// (mk/Dialect/Schedule/TaskKinds.h); `opaque` is a task the analysis passes
// see only through its accesses, counters and barriers (their tests use it),
// which the partitioner and the emitter refuse.
//
// The partition: how a task's work is cut into its instances, set by
// schedule-partition-work from the cut it picks (TaskCuts.h); before it,
// schedule-form-phases marks the tasks every block runs (`every_block`)
// and the accumulators' zeroing tasks (`slices`).
//
//===----------------------------------------------------------------------===//

#ifndef MK_SCHEDULE_ATTRS_TD
#define MK_SCHEDULE_ATTRS_TD

include "mk/Dialect/Schedule/ScheduleDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Schedule_TaskKind : I32EnumAttr<"TaskKind", "the device template of a task", [
    I32EnumAttrCase<"ResidualRmsnorm", 0, "residual_rmsnorm">,
    I32EnumAttrCase<"W4A16Gemv", 1, "w4a16_gemv">,
    I32EnumAttrCase<"Bf16Rows", 2, "bf16_rows">,
    I32EnumAttrCase<"KdaHeadChunk", 3, "kda_head_chunk">,
    I32EnumAttrCase<"ConvCommit", 4, "conv_commit">,
    I32EnumAttrCase<"ZeroF32", 5, "zero_f32">,
    I32EnumAttrCase<"FinalResidual", 6, "final_residual">,
    I32EnumAttrCase<"MlaRopeAppend", 7, "mla_rope_append">,
    I32EnumAttrCase<"MlaQAbsorb", 8, "mla_q_absorb">,
    I32EnumAttrCase<"MlaAttentionChunk", 9, "mla_attention_chunk">,
    I32EnumAttrCase<"MlaCombineWv", 10, "mla_combine_wv">,
    I32EnumAttrCase<"MoeGateUp", 11, "moe_gate_up">,
    I32EnumAttrCase<"MoeDown", 12, "moe_down">,
    I32EnumAttrCase<"Opaque", 13, "opaque">,
    I32EnumAttrCase<"GqaRopeAppend", 14, "gqa_rope_append">,
    I32EnumAttrCase<"GqaAttentionChunk", 15, "gqa_attention_chunk">,
    I32EnumAttrCase<"GqaCombine", 16, "gqa_combine">,
    I32EnumAttrCase<"KdaGatedNorm", 17, "kda_gated_norm">,
    I32EnumAttrCase<"Argmax", 18, "argmax">]> {
  let cppNamespace = "::mk::schedule";
  let genSpecializedAttr = 0;
}

def Schedule_Partition : I32EnumAttr<"Partition", "how a task's work is cut into instances", [
    I32EnumAttrCase<"EveryBlock", 0, "every_block">,
    I32EnumAttrCase<"Cols", 1, "cols">,
    I32EnumAttrCase<"SplitK", 2, "split_k">,
    I32EnumAttrCase<"Rows", 3, "rows">,
    I32EnumAttrCase<"Heads", 4, "heads">,
    I32EnumAttrCase<"Experts", 5, "experts">,
    I32EnumAttrCase<"Chunks", 6, "chunks">,
    I32EnumAttrCase<"Slices", 7, "slices">,
    I32EnumAttrCase<"Channels", 8, "channels">]> {
  let cppNamespace = "::mk::schedule";
  let genSpecializedAttr = 0;
}

// `#schedule.partition<split_k>`: every block runs the task whole
// (`every_block`: the norm it recomputes into shared memory), or its
// instances each take a slice of the output columns (`cols`), of the
// reduction (`split_k`, accumulated), of rows (`rows`), heads, expert
// slots, context chunks, output slices or channels.
def Schedule_PartitionAttr : EnumAttr<Schedule_Dialect, Schedule_Partition, "partition"> {
  let assemblyFormat = "`<` $value `>`";
}


#endif // MK_SCHEDULE_ATTRS_TD
