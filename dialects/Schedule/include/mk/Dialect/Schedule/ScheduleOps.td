//===- ScheduleOps.td - Ops of the schedule dialect --------*- tablegen -*-===//

#ifndef MK_SCHEDULE_OPS_TD
#define MK_SCHEDULE_OPS_TD

include "mk/Dialect/Schedule/ScheduleDialect.td"
include "mk/Dialect/Schedule/ScheduleAttrs.td"
include "mk/Dialect/Schedule/ScheduleInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

def Schedule_BufferRefs
    : TypedArrayAttrBase<SymbolRefAttr, "array of buffer references"> {
  let constBuilderCall = "$_builder.getArrayAttr($0)";
}

def Schedule_KernelOp : Schedule_Op<"kernel", [
    Symbol, SymbolTable, SingleBlock, NoTerminator, IsolatedFromAbove]> {
  let summary = "One cooperative kernel: buffers, counters, phases, barriers";
  let description = [{
    The body runs top to bottom in every thread block. `threads` is the block
    size, `target_sms` the SM count the work partitioning balanced for (any
    co-resident grid size stays correct). `config` is the block spec the
    kernel was compiled from, as the frontend read it (one attribute per
    spec key); it is carried into the manifest and read by no pass or
    emitter: what they need is in the ops (`schedule.weight` for the
    parameters, `space = "state"` buffers for decode state, task
    arguments). `num_layers`
    is the block's layer count.
    `workspace_bytes` is -1 until the workspace is planned. How each weight
    is stored is the `schedule.weight`'s own (`tile`, `order`).
    `early_weight_streams` (set by `schedule-prefetch-weights`): each
    block's first instance of a packed GEMV task in a phase starts its
    weight stream at the phase's entry, before the counter waits (in a
    phase with the every-block norm, before the norm or, in its one-sum
    form rounded once with the resident residual, between its loads and
    its arithmetic).
    `tile_stages_ahead` (set by `schedule-prefetch-weights`) is how many
    stages of a grouped packed GEMV tile's weight ring (the `folded` and
    `scaled` arithmetics' tile) are asked for before its first step, the
    next one after each stage's steps; 0 asks for the whole ring up front;
    1 is refused (ptxas 13.0 miscompiles that tile). The emitter clamps it
    to the ring's stages.
    `max_shared_bytes` (0: no limit) is the shared memory one block may use
    on the target; the CUDA emitter refuses a kernel that needs more.
    `packed_arithmetic` (set by `schedule-tile-weights`) is the math of the
    tiles that stream `order = "mma"` weights: `"scaled"` (each group's
    scale applied once per column to fp32 sums of x (q - z)), `"folded"`
    (the same with the zero points subtracted per group: sums of x (128 +
    q) less (128 + z) times the sum of x) or `"exact"` (every weight
    dequantized to bf16 as the spec rounds it). `scaled` and `folded` take
    weights whose quantization groups hold whole 1 KB steps (a multiple of
    16 rows at 128 wide, 32 at 64); the others dequantize as `exact`.
    `embedding` (the whole model): the step's input is a token id (the
    kernel parameter `token`) and `@hidden_in` its row of this weight;
    `logits` names the buffer of the step's logits, which the manifest
    publishes (their workspace offset) beside the io buffer `@next_token`.

    ```mlir
    schedule.kernel @mk_tiny attributes {threads = 256 : i64} {
      schedule.buffer @q {dtype = "bf16", shape = array<i64: 64>}
      schedule.phase "project" {
        schedule.opaque "q_proj" {count = 4 : i64, writes = [@q]}
      }
      schedule.barrier
      schedule.phase "use" {
        schedule.opaque "use" {count = 1 : i64, reads = [@q]}
      }
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$threads,
    DefaultValuedAttr<I64Attr, "132">:$target_sms,
    DefaultValuedAttr<I64Attr, "-1">:$workspace_bytes,
    OptionalAttr<DictionaryAttr>:$config,
    DefaultValuedAttr<I64Attr, "0">:$num_layers,
    UnitAttr:$debug_capture,
    UnitAttr:$early_weight_streams,
    DefaultValuedAttr<I64Attr, "0">:$tile_stages_ahead,
    DefaultValuedAttr<I64Attr, "0">:$max_shared_bytes,
    DefaultValuedStrAttr<StrAttr, "exact">:$packed_arithmetic,
    OptionalAttr<StrAttr>:$embedding, OptionalAttr<FlatSymbolRefAttr>:$logits);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name, "int64_t":$threads)>];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// Number of `schedule.phase` / `schedule.barrier` ops.
    int64_t getNumPhases();
    int64_t getNumBarriers();
    /// Sum of the sizes of all counters.
    int64_t getNumCounterWords();
  }];
}

def Schedule_BufferOp : Schedule_Op<"buffer", [
    Symbol, HasParent<"KernelOp">]> {
  let summary = "A tensor exchanged between tasks";
  let description = [{
    `space` is `"io"` (the step's hidden input/output), `"workspace"` (an interval of the workspace arena; `offset` is
    -1 until planned), `"state"` (a decode-state tensor, declared so that its
    hazards are checked; never planned) or `"shared"` (per-block shared
    memory, written by an `every_block` task; never crosses blocks). A
    `state` buffer may carry the `layer` of its graph symbol.

    ```mlir
    schedule.buffer @l0.qkvg {dtype = "bf16", shape = array<i64: 16384>}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    StrAttr:$dtype,
    DenseI64ArrayAttr:$shape,
    DefaultValuedStrAttr<StrAttr, "workspace">:$space,
    DefaultValuedAttr<I64Attr, "-1">:$offset,
    OptionalAttr<I64Attr>:$layer);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumElements();
    /// Bytes of the tensor (element count times the dtype's size).
    int64_t getSizeInBytes();
    bool isWorkspace() { return getSpace() == "workspace"; }
  }];
}

def Schedule_CounterOp : Schedule_Op<"counter", [
    Symbol, HasParent<"KernelOp">]> {
  let summary = "An array of dependency counters";
  let description = [{
    `size` counters, each counting the producer task instances that finished
    the part of the work it stands for (a head, an expert). `base` is the
    index of the first one among the kernel's counter words (-1 until
    assigned).

    ```mlir
    schedule.counter @l0.heads_ready {size = 32 : i64}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$size,
    DefaultValuedAttr<I64Attr, "-1">:$base);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def Schedule_WeightOp : Schedule_Op<"weight", [
    Symbol, HasParent<"KernelOp">]> {
  let summary = "A model parameter the kernel binds";
  let description = [{
    One read-only kernel argument the runtime binds by name. The symbol is
    the state-dict name; `dtype` and `shape` are the tensor's as the spec
    stores it. A W4A16 weight `w` is three of them, `w.w_q` (u8
    `[E.., K/2, N]`), `w.scales` and `w.zeros` (bf16 `[E.., K/group, N]`),
    each carrying its quantization `group` (input rows per scale); other
    parameters have none (0). Its storage (set by `schedule-tile-weights`,
    the same on the three parts): `tile` 0 is the spec's row-major layout;
    a tile width (16..128, a multiple of 16) means the kernel expects the
    tensor tile-contiguous, [E..][N/tile][rows][tile]
    (docs/kernel-abi.md), which the runtime repacks it to at bind; `order`
    (on a `.w_q` of 128- or 64-wide tiles only) that each tile's steps are
    further in a packed tile's lane order: `mma` (the exact tensor-core
    tile, 1 KB steps) or `int8` (the integer tile, 32-row steps), streamed
    as such. The kernel signature, the manifest's parameter list (with each
    tensor's tile and order) and the group of every GEMV tile come from
    these ops, in their order (decode state comes from the `space =
    "state"` buffers). `layer` (optional): the layer it belongs to, from the
    graph symbol (what the debug captures are grouped by).

    ```mlir
    schedule.weight @blocks.0.attn.q_proj.w_q {dtype = "u8",
        shape = array<i64: 1152, 4096>, group = 128 : i64, order = "mma", tile = 64 : i64}
    schedule.weight @blocks.0.attn_norm {dtype = "bf16", shape = array<i64: 2304>}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    StrAttr:$dtype,
    DenseI64ArrayAttr:$shape,
    DefaultValuedAttr<I64Attr, "0">:$group,
    DefaultValuedAttr<I64Attr, "0">:$tile,
    DefaultValuedStrAttr<StrAttr, "">:$order,
    OptionalAttr<I64Attr>:$layer);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumElements();
    int64_t getSizeInBytes();
  }];
}

def Schedule_PhaseOp : Schedule_Op<"phase", [
    SingleBlock, NoTerminator, HasParent<"KernelOp">]> {
  let summary = "Tasks spread over the grid between two synchronization points";
  let description = [{
    The instances of the phase's tasks, in task order, form one index space
    dealt to the blocks round-robin (instance `i` runs on block
    `(i + deal_offset) % gridDim.x`, each block in increasing order);
    `every_block` tasks run once in every block before the others.
    `deal_offset` (set by `schedule-deal-tasks`, default 0) continues the
    deal where the earlier phases stopped. `l2_prefetch` (set by
    `schedule-prefetch-weights`) names weights that a later phase reads:
    every block asks for its share of them to be brought into L2 as it
    enters this phase, so that the memory system streams them while this
    phase computes, waits and synchronizes. `early_weight_streams` (set by
    `schedule-prefetch-weights`: `norm-free-streams` on phases without an
    every-block norm, `norm-streams` on phases with one):
    each block's first instance of a packed GEMV task in this phase starts
    its weight stream at the phase's entry, before its counter waits, as the
    kernel's attribute of that name does for every phase.
    `l2_first_tasks` (set by `schedule-prefetch-weights`: `l2-first-tasks`
    on phases with an every-block norm, which start after a grid barrier;
    `kda-state-l2` on phases of KDA gated-delta tasks, whose first
    instance's state slice and conv parameters it asks for): each block asks L2
    for the weights of its first instance of the phase's packed GEMV and
    bf16-row tasks as it enters the phase, so that they stream while every
    block computes the norm (no shared memory is used: the norm stages
    through the work area).
    `l2_routed_tasks` (set by `schedule-prefetch-weights`:
    `routed-tasks-l2` on phases of routed MoE down tiles): a block that
    computes their router's top-k in an earlier phase (the experts' gate/up
    tiles) asks L2 right then for its first instance of this phase, where
    that is a routed down tile of tile-packed weights (the tile's k-slice
    of w_q, scales and zero points), so that they stream while the gate/up
    phase computes.
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrArrayAttr>:$l2_prefetch,
                   DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$deal_offset,
                   UnitAttr:$early_weight_streams, UnitAttr:$l2_first_tasks,
                   UnitAttr:$l2_routed_tasks);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$name attr-dict-with-keyword $body";
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name)>];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// The bytes its tasks stream as the schedule counts them (each task's
    /// `bytes`: weights and activations, not the MLA cache's rows).
    int64_t getTaskBytes();
    /// Its grid tasks (all but the every_block ones), in order, each with
    /// the number of its first instance.
    ::llvm::SmallVector<GridTask> getGridTasks();
    /// How many instances its grid tasks have together.
    int64_t getNumGridInstances();
    /// Whether it has a routed moe_down task (one that names its router's
    /// logits): what `l2_routed_tasks` requires.
    bool hasRoutedMoeDown();
  }];
}

// Task arguments: the attribute constraints of the template parameters.
// The kernel's index arithmetic is 32-bit: integers stay below 2^31
// (TaskKinds.h, kMaxTaskArg).
def Schedule_PosArg : ConfinedAttr<I64Attr, [IntPositive, IntMaxValue<2147483647>]> {
  let summary = "an integer in 1..2147483647";
}
def Schedule_NonNegArg : ConfinedAttr<I64Attr, [IntNonNegative, IntMaxValue<2147483647>]> {
  let summary = "an integer in 0..2147483647";
}
def Schedule_PosArrayArg
    : ConfinedAttr<TypedArrayAttrBase<Schedule_PosArg, "">, [ArrayMinCount<1>]> {
  let summary = "a non-empty array of integers in 1..2147483647";
}
def Schedule_WeightName
    : ConfinedAttr<StrAttr, [AttrConstraint<
          CPred<"!::llvm::cast<::mlir::StringAttr>($_self).getValue().empty()">, "">]> {
  let summary = "a weight's name (a schedule.weight, or the prefix of a W4A16 weight's parts)";
}
def Schedule_WeightNames
    : ConfinedAttr<TypedArrayAttrBase<Schedule_WeightName, "">, [ArrayMinCount<1>]> {
  let summary = "a non-empty array of weight names";
}
def Schedule_BufferArgs : ConfinedAttr<FlatSymbolRefArrayAttr, [ArrayMinCount<1>]> {
  let summary = "a non-empty array of buffers of the kernel, as symbols (@name)";
}
def Schedule_EpilogueArg
    : ConfinedAttr<StrAttr, [AttrConstraint<
          CPred<"::llvm::is_contained({::llvm::StringRef(\"bf16\"), "
                "::llvm::StringRef(\"atomic_f32\")}, "
                "::llvm::cast<::mlir::StringAttr>($_self).getValue())">, "">]> {
  let summary = "\"bf16\" (rounded and stored) or \"atomic_f32\" (added to fp32 sums)";
}

def Schedule_Bf16StepsArg
    : ConfinedAttr<StrAttr, [AttrConstraint<
          CPred<"::llvm::is_contained({::llvm::StringRef(\"hidden\"), "
                "::llvm::StringRef(\"hidden_and_output\")}, "
                "::llvm::cast<::mlir::StringAttr>($_self).getValue())">, "">]> {
  let summary = "\"hidden\" (gate, up, silu(gate) and the product rounded to bf16) or "
                "\"hidden_and_output\" (and each expert's output before its weight)";
}

// Tasks: one op per kind (the device template its instances call), all
// with the attributes of Schedule_TaskBase and TaskOpInterface
// (ScheduleInterfaces.td), and each with its own arguments, `kindArgs`.
// A kind whose template waits in its prologue lists the
// TaskOpInterface methods it answers itself in `methods`
// (`getPrologueGuardedBuffers`, TaskKinds.cpp).
class Schedule_TaskBase<string mnemonic, string kindCase, string what, dag kindArgs,
                        list<string> methods = []>
    : Schedule_Op<mnemonic, [HasParent<"PhaseOp">,
                             DeclareOpInterfaceMethods<Schedule_TaskOpInterface,
                                 !listconcat(["getKind", "getLegalCuts"], methods)>]> {
  let summary = "A task of kind " # mnemonic # ": " # what;
  let description = [{
    `count` instances of the kind's template call, spread over the grid's
    blocks within the phase; `partition` says how the op's work is cut
    (`cols`, `split_k`, `heads`, `experts`, `chunks`, `every_block`, ...),
    `bytes` how many bytes all instances stream from memory together (the
    partitioner balances on it). The other attributes are the kind's
    arguments, the template parameters (buffers as symbol references,
    weights by state-dict name, dimensions, tile sizes), each typed here and
    listed in the dialect's registry (mk/Dialect/Schedule/TaskKinds.h) with
    when it is required (from the task's creation, once
    schedule-partition-work has cut it, or only where the model has it) and,
    for a buffer argument, how the task accesses the buffer it names: the
    task's accesses (`taskAccesses`) are what its buffer arguments say, plus
    `reads`, `writes` and `accumulates`, which name only what no argument
    does (an `opaque` task's accesses, seen only by the passes that read
    accesses and counters). An accumulated buffer must have been written
    (zeroed) before. An attribute neither the kind nor every task declares
    (a name without a dialect prefix) is refused.

    `unit` names the unit of the task's output its consumers wait on (a KDA
    head, an expert slot: schedule-form-phases); `grain`, `grain_per` and
    `grain_span` are the partition's: the instances per unit, and how many
    of a consumer's units one producer unit covers
    (schedule-barriers-to-counters places per-unit counters on them).
    `cut_blocks` (set by `schedule-partition-work` where it balanced the
    task into the blocks its phase leaves idle): the blocks the task's cut
    was chosen for, which the pass, run again, cuts it for again; it then
    moves no task between phases of a kernel whose counters are placed.

    ```mlir
    schedule.w4a16_gemv "l0.o_proj" {bytes = 4718592 : i64, count = 128 : i64,
        epilogue = "atomic_f32", group = 128 : i64, input = @l0.kda_o,
        k = 4096 : i64, n = [2304], op = "graph.linear_w4a16",
        outputs = [@l0.attn_acc], partition = #schedule.partition<split_k>,
        weights = ["l0.o_proj"]}
    ```
  }];
  let arguments = !con((ins
    StrAttr:$name,
    DefaultValuedAttr<I64Attr, "1">:$count,
    DefaultValuedStrAttr<StrAttr, "">:$op,
    OptionalAttr<Schedule_PartitionAttr>:$partition,
    DefaultValuedAttr<I64Attr, "0">:$bytes,
    DefaultValuedAttr<Schedule_BufferRefs, "{}">:$reads,
    DefaultValuedAttr<Schedule_BufferRefs, "{}">:$writes,
    DefaultValuedAttr<Schedule_BufferRefs, "{}">:$accumulates,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$cut_blocks,
    OptionalAttr<StrAttr>:$unit,
    OptionalAttr<StrAttr>:$grain,
    OptionalAttr<Schedule_PosArg>:$grain_per,
    OptionalAttr<Schedule_PosArg>:$grain_span), kindArgs);
  let assemblyFormat = "$name attr-dict";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mk::schedule::TaskKind $cppClass::getKind() {
      return ::mk::schedule::TaskKind::}] # kindCase # [{;
    }
    ::mlir::LogicalResult $cppClass::verify() {
      return ::mk::schedule::verifyTaskOp(
          ::llvm::cast<::mk::schedule::TaskOpInterface>(getOperation()));
    }
  }];
}

// Arguments both expert kinds take: the slots and their cut, and (a routed
// expert task, one whose `logits` is set) the router's; a sigmoid router's
// correction bias [experts] where the model has one.
defvar Schedule_ExpertArgs = (ins
    OptionalAttr<FlatSymbolRefAttr>:$logits, Schedule_PosArg:$hidden, Schedule_PosArg:$inter,
    Schedule_PosArg:$slots, Schedule_PosArg:$group, OptionalAttr<Schedule_PosArg>:$tn,
    OptionalAttr<Schedule_PosArg>:$ksplit, OptionalAttr<Schedule_PosArg>:$tiles,
    OptionalAttr<Schedule_PosArg>:$experts, OptionalAttr<Schedule_PosArg>:$top_k,
    OptionalAttr<F64Attr>:$scaling, OptionalAttr<Schedule_WeightName>:$router_bias,
    // schedule-poll-router-logits: the task reads `logits` by polling each
    // value until its polled store has landed (a Bf16Rows task's
    // `polled_output`), with no counter wait for the router.
    UnitAttr:$poll_logits);

def Schedule_ResidualRmsnormOp : Schedule_TaskBase<"residual_rmsnorm", "ResidualRmsnorm",
    "residual add (of `acc` rounded to bf16, or with `acc2` of bf16(bf16(acc) + bf16(acc2))) "
    "and RMSNorm (rounded `roundings` times, 1 or 2; default 1), recomputed by every block "
    "into shared memory", (ins
    FlatSymbolRefAttr:$base, OptionalAttr<FlatSymbolRefAttr>:$acc,
    OptionalAttr<FlatSymbolRefAttr>:$acc2,
    OptionalAttr<FlatSymbolRefAttr>:$out, OptionalAttr<FlatSymbolRefAttr>:$xs,
    Schedule_WeightName:$weight, Schedule_PosArg:$dim, F64Attr:$eps,
    OptionalAttr<StrArrayAttr>:$captures, OptionalAttr<Schedule_PosArg>:$roundings)>;
def Schedule_W4A16GemvOp : Schedule_TaskBase<"w4a16_gemv", "W4A16Gemv",
    "W4A16 matrix-vector product tiles of one or more weights sharing an input", (ins
    Schedule_WeightNames:$weights, Schedule_BufferArgs:$outputs, Schedule_PosArrayArg:$n,
    Schedule_PosArg:$k, Schedule_PosArg:$group, FlatSymbolRefAttr:$input,
    OptionalAttr<Schedule_NonNegArg>:$input_offset, OptionalAttr<Schedule_NonNegArg>:$unit_cols,
    OptionalAttr<Schedule_EpilogueArg>:$epilogue, OptionalAttr<Schedule_PosArg>:$tn,
    OptionalAttr<Schedule_PosArg>:$ksplit, OptionalAttr<Schedule_PosArg>:$tiles,
    OptionalAttr<StrArrayAttr>:$captures,
    // The released KDA's gated output norm folded into the input's staging
    // (schedule-fuse-kda-gated-norm): `input` is then the gated delta's
    // output o, and the tile stages bf16(o * rsqrt(mean(o^2) + eps) * w *
    // sigmoid(gate)) per head of `gated_norm_head_dim` values.
    OptionalAttr<FlatSymbolRefAttr>:$gated_norm_gate,
    OptionalAttr<Schedule_WeightName>:$gated_norm_weight,
    OptionalAttr<F64Attr>:$gated_norm_eps, OptionalAttr<Schedule_PosArg>:$gated_norm_head_dim,
    // The argmax of the output folded into the tiles (schedule-fuse-argmax):
    // each tile merges the argmax of the columns it stored into
    // `argmax_scratch` (as the argmax task's), and the last tile writes the
    // index to `argmax_output`.
    OptionalAttr<FlatSymbolRefAttr>:$argmax_output,
    OptionalAttr<FlatSymbolRefAttr>:$argmax_scratch),
    ["getPrologueGuardedBuffers"]>;
def Schedule_Bf16RowsOp : Schedule_TaskBase<"bf16_rows", "Bf16Rows",
    "dot products of bf16 weight rows with the input (router, beta)", (ins
    Schedule_WeightName:$weight, OptionalAttr<FlatSymbolRefAttr>:$input,
    FlatSymbolRefAttr:$output, Schedule_PosArg:$k, Schedule_PosArg:$rows,
    OptionalAttr<Schedule_PosArg>:$rows_per_task, OptionalAttr<StrArrayAttr>:$captures,
    // schedule-poll-router-logits: each output value stored for readers
    // that poll it (never the all-zero bits, one relaxed store).
    UnitAttr:$polled_output)>;
def Schedule_KdaHeadChunkOp : Schedule_TaskBase<"kda_head_chunk", "KdaHeadChunk",
    "short convolutions and the gated delta rule over a chunk of a KDA head's state", (ins
    FlatSymbolRefAttr:$q, FlatSymbolRefAttr:$k, FlatSymbolRefAttr:$v, FlatSymbolRefAttr:$g,
    FlatSymbolRefAttr:$beta, FlatSymbolRefAttr:$o, FlatSymbolRefAttr:$S,
    FlatSymbolRefAttr:$cq, FlatSymbolRefAttr:$ck, FlatSymbolRefAttr:$cv,
    Schedule_WeightName:$conv_w, Schedule_PosArg:$conv, Schedule_PosArg:$head_dim,
    Schedule_PosArg:$heads, OptionalAttr<Schedule_PosArg>:$chunk,
    // The output projection folded in (schedule-fuse-kda-o-proj): its
    // weight [heads * head_dim, o_n] and the fp32 sums it adds to.
    OptionalAttr<Schedule_WeightName>:$o_weight, OptionalAttr<FlatSymbolRefAttr>:$o_acc,
    OptionalAttr<Schedule_PosArg>:$o_n,
    // The released form: q and k L2-normalized per head with this epsilon
    // on the sum of squares; the low-rank decay's fp32 rate per head and
    // bias per channel (-exp(a_log) * softplus(g + dt_bias)).
    OptionalAttr<F64Attr>:$qk_l2_eps, OptionalAttr<Schedule_WeightName>:$a_log,
    OptionalAttr<Schedule_WeightName>:$dt_bias)>;
def Schedule_KdaGatedNormOp : Schedule_TaskBase<"kda_gated_norm", "KdaGatedNorm",
    "the released KDA's sigmoid-gated RMSNorm of a head's output", (ins
    FlatSymbolRefAttr:$input, FlatSymbolRefAttr:$gate, FlatSymbolRefAttr:$output,
    Schedule_WeightName:$weight, Schedule_PosArg:$heads, Schedule_PosArg:$head_dim,
    F64Attr:$eps)>;
def Schedule_ArgmaxOp : Schedule_TaskBase<"argmax", "Argmax",
    "the first index of the largest of `n` bf16 values, each instance over a slice; the last "
    "to finish writes it", (ins
    FlatSymbolRefAttr:$input, FlatSymbolRefAttr:$output, FlatSymbolRefAttr:$scratch,
    Schedule_PosArg:$n)>;
def Schedule_ConvCommitOp : Schedule_TaskBase<"conv_commit", "ConvCommit",
    "the KDA short convolutions' windows shifted by the new token", (ins
    FlatSymbolRefAttr:$q, FlatSymbolRefAttr:$k, FlatSymbolRefAttr:$v,
    FlatSymbolRefAttr:$cq, FlatSymbolRefAttr:$ck, FlatSymbolRefAttr:$cv,
    Schedule_PosArg:$channels, Schedule_PosArg:$conv)>;
def Schedule_ZeroF32Op : Schedule_TaskBase<"zero_f32", "ZeroF32",
    "zeroes an fp32 accumulator", (ins FlatSymbolRefAttr:$buffer, Schedule_PosArg:$n)>;
def Schedule_FinalResidualOp : Schedule_TaskBase<"final_residual", "FinalResidual",
    "the block's output: the last residual add (of `acc` rounded to bf16, or with `acc2` of "
    "bf16(bf16(acc) + bf16(acc2)))", (ins
    FlatSymbolRefAttr:$base, FlatSymbolRefAttr:$acc, OptionalAttr<FlatSymbolRefAttr>:$acc2,
    FlatSymbolRefAttr:$out,
    Schedule_PosArg:$dim)>;
def Schedule_MlaRopeAppendOp : Schedule_TaskBase<"mla_rope_append", "MlaRopeAppend",
    "MLA RoPE of queries and key (without `theta`: copied as projected), the new latent row "
    "(normalized with the `latent_norm` weight and `latent_eps` where given, rounded "
    "`latent_roundings` times: 1 or 2) appended to the cache", (ins
    FlatSymbolRefAttr:$q, FlatSymbolRefAttr:$kv, FlatSymbolRefAttr:$q_rope,
    FlatSymbolRefAttr:$c_kv, FlatSymbolRefAttr:$k_rope, OptionalAttr<F64Attr>:$theta,
    Schedule_PosArg:$lora, Schedule_PosArg:$heads, Schedule_PosArg:$nope,
    Schedule_PosArg:$rope, OptionalAttr<Schedule_WeightName>:$latent_norm,
    OptionalAttr<F64Attr>:$latent_eps, OptionalAttr<Schedule_PosArg>:$latent_roundings)>;
def Schedule_MlaQAbsorbOp : Schedule_TaskBase<"mla_q_absorb", "MlaQAbsorb",
    "MLA queries absorbed into the latent space (W_kv_b's key part)", (ins
    FlatSymbolRefAttr:$q, FlatSymbolRefAttr:$q_abs, Schedule_WeightName:$kv_b,
    Schedule_PosArg:$nope, Schedule_PosArg:$lora, Schedule_PosArg:$heads,
    Schedule_PosArg:$v_head, Schedule_PosArg:$rope), ["getPrologueGuardedBuffers"]>;
def Schedule_MlaAttentionChunkOp : Schedule_TaskBase<"mla_attention_chunk", "MlaAttentionChunk",
    "MLA attention over a chunk of cache rows for a group of heads (partial softmax sums)", (ins
    FlatSymbolRefAttr:$q_abs, FlatSymbolRefAttr:$q_rope, FlatSymbolRefAttr:$c_kv,
    FlatSymbolRefAttr:$k_rope, FlatSymbolRefAttr:$part_m, FlatSymbolRefAttr:$part_l,
    FlatSymbolRefAttr:$part_acc, F64Attr:$scale, Schedule_PosArg:$heads,
    Schedule_PosArg:$lora, Schedule_PosArg:$rope, OptionalAttr<Schedule_PosArg>:$head_group,
    OptionalAttr<Schedule_PosArg>:$max_chunks, OptionalAttr<Schedule_NonNegArg>:$sub_rows,
    OptionalAttr<Schedule_NonNegArg>:$query_parts, OptionalAttr<Schedule_NonNegArg>:$chunk_rows),
    ["getPrologueGuardedBuffers"]>;
def Schedule_MlaCombineWvOp : Schedule_TaskBase<"mla_combine_wv", "MlaCombineWv",
    "MLA partials merged and W_kv_b's value part applied, per head and latent slice", (ins
    FlatSymbolRefAttr:$part_m, FlatSymbolRefAttr:$part_l, FlatSymbolRefAttr:$part_acc,
    FlatSymbolRefAttr:$o, Schedule_WeightName:$kv_b, Schedule_PosArg:$heads,
    Schedule_PosArg:$lora, Schedule_PosArg:$v_head, Schedule_PosArg:$nope,
    Schedule_PosArg:$group, OptionalAttr<Schedule_PosArg>:$slices), ["getPrologueGuardedBuffers"]>;
def Schedule_MoeGateUpOp : Schedule_TaskBase<"moe_gate_up", "MoeGateUp",
    "MoE expert gate and up projection tiles (fp32 sums)", !con((ins
    Schedule_WeightName:$gate, Schedule_WeightName:$up, OptionalAttr<FlatSymbolRefAttr>:$input,
    FlatSymbolRefAttr:$sums), Schedule_ExpertArgs)>;
def Schedule_MoeDownOp : Schedule_TaskBase<"moe_down", "MoeDown",
    "MoE expert down projection tiles of silu(gate) * up, weighted by the router (in fp32, or "
    "in the bf16 steps `bf16_steps` says)", !con((ins
    Schedule_WeightName:$down, FlatSymbolRefAttr:$sums, FlatSymbolRefAttr:$acc,
    OptionalAttr<Schedule_Bf16StepsArg>:$bf16_steps),
    Schedule_ExpertArgs), ["getPrologueGuardedBuffers"]>;
def Schedule_GqaRopeAppendOp : Schedule_TaskBase<"gqa_rope_append", "GqaRopeAppend",
    "GQA q and k heads normalized and rotated, the new key and value rows appended", (ins
    FlatSymbolRefAttr:$q, FlatSymbolRefAttr:$k, FlatSymbolRefAttr:$v,
    FlatSymbolRefAttr:$q_out, FlatSymbolRefAttr:$k_cache, FlatSymbolRefAttr:$v_cache,
    Schedule_WeightName:$q_norm, Schedule_WeightName:$k_norm, Schedule_PosArg:$heads,
    Schedule_PosArg:$kv_heads, Schedule_PosArg:$head_dim, F64Attr:$theta, F64Attr:$eps)>;
def Schedule_GqaAttentionChunkOp : Schedule_TaskBase<"gqa_attention_chunk", "GqaAttentionChunk",
    "GQA attention of one kv head's query heads over a chunk of cache rows (partial softmax sums)", (ins
    FlatSymbolRefAttr:$q, FlatSymbolRefAttr:$k_cache, FlatSymbolRefAttr:$v_cache,
    FlatSymbolRefAttr:$part_m, FlatSymbolRefAttr:$part_l, FlatSymbolRefAttr:$part_acc,
    Schedule_PosArg:$heads, Schedule_PosArg:$kv_heads, Schedule_PosArg:$head_dim,
    OptionalAttr<Schedule_PosArg>:$max_chunks)>;
def Schedule_GqaCombineOp : Schedule_TaskBase<"gqa_combine", "GqaCombine",
    "GQA partials of the chunks merged per query head, rounded to bf16", (ins
    FlatSymbolRefAttr:$part_m, FlatSymbolRefAttr:$part_l, FlatSymbolRefAttr:$part_acc,
    FlatSymbolRefAttr:$o, Schedule_PosArg:$heads, Schedule_PosArg:$head_dim,
    OptionalAttr<Schedule_PosArg>:$heads_per_task)>;
// `args`: what a test writes down about an opaque task (nothing reads it but
// the kernel verifier, which checks that a buffer it names is accessed).
def Schedule_OpaqueTaskOp : Schedule_TaskBase<"opaque", "Opaque",
    "a task the analysis passes see only through its accesses, counters and barriers",
    (ins OptionalAttr<DictionaryAttr>:$args)>;

def Schedule_SignalOp : Schedule_Op<"signal", [HasParent<"PhaseOp">]> {
  let summary = "Task instances increment a counter when done";
  let description = [{
    Instance `i` of task `task` adds one to counter `i / divisor` of
    `counter` once its writes are visible.

    ```mlir
    schedule.signal @l0.heads_ready {task = "l0.qkvg", divisor = 8 : i64}
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$counter,
    StrAttr:$task,
    DefaultValuedAttr<I64Attr, "1">:$divisor);
  let assemblyFormat = "$counter attr-dict";
}

def Schedule_WaitOp : Schedule_Op<"wait", [HasParent<"PhaseOp">]> {
  let summary = "Task instances wait for a counter before they start";
  let description = [{
    Instance `j` of task `task` starts once counters
    `(j / divisor) * span` .. `(j / divisor) * span + span - 1` of `counter`
    reached `target`. Every task that signals the counter must come
    before `task` in program order (deadlock freedom on a co-resident grid).
    With `in_prologue` the instance starts before that and waits in its
    prologue, once its weight copies (or first cache rows) are requested,
    so that they stream under the wait (schedule-prologue-waits): only a
    task whose kind has a waiting form and on a counter guarding only what
    that form stages after the wait (TaskOpInterface's
    `getPrologueGuardedBuffers`), and at most one such wait per task (two
    for a GEMV with a gated-norm input).

    ```mlir
    schedule.wait @l0.heads_ready {task = "l0.kda", divisor = 4 : i64, target = 9 : i64}
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$counter,
    StrAttr:$task,
    DefaultValuedAttr<I64Attr, "1">:$divisor,
    DefaultValuedAttr<I64Attr, "1">:$span,
    I64Attr:$target,
    UnitAttr:$in_prologue);
  let assemblyFormat = "$counter attr-dict";
  let hasVerifier = 1;
}

def Schedule_BarrierOp : Schedule_Op<"barrier", [HasParent<"KernelOp">]> {
  let summary = "Grid barrier: every block waits for all others";
  let assemblyFormat = "attr-dict";
}

#endif // MK_SCHEDULE_OPS_TD
