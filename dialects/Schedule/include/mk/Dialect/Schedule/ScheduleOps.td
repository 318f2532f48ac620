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
    weight stream at the phase's entry, before the norm and counter waits.
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
    DefaultValuedAttr<I64Attr, "0">:$max_shared_bytes,
    DefaultValuedStrAttr<StrAttr, "exact">:$packed_arithmetic);
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
    `schedule-prefetch-weights` on phases without an every-block norm):
    each block's first instance of a packed GEMV task in this phase starts
    its weight stream at the phase's entry, before its counter waits, as the
    kernel's attribute of that name does for every phase.
    `l2_first_tasks` (set by `schedule-prefetch-weights` on phases with an
    every-block norm, which start after a grid barrier): each block asks L2
    for the weights of its first instance of the phase's packed GEMV and
    bf16-row tasks as it enters the phase, so that they stream while every
    block computes the norm (no shared memory is used: the norm stages
    through the work area).
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrArrayAttr>:$l2_prefetch,
                   DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$deal_offset,
                   UnitAttr:$early_weight_streams, UnitAttr:$l2_first_tasks);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$name attr-dict-with-keyword $body";
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name)>];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

// Tasks: one op per kind (the device template its instances call), all
// with the same attributes and TaskOpInterface (ScheduleInterfaces.td).
class Schedule_TaskBase<string mnemonic, string kindCase, string what>
    : Schedule_Op<mnemonic, [HasParent<"PhaseOp">,
                             DeclareOpInterfaceMethods<Schedule_TaskOpInterface, ["getKind", "getLegalCuts"]>]> {
  let summary = "A task of kind " # mnemonic # ": " # what;
  let description = [{
    `count` instances of the kind's template call, spread over the grid's
    blocks within the phase; `partition` says how the op's work is cut
    (`cols`, `split_k`, `heads`, `experts`, `chunks`, `every_block`, ...),
    `bytes` how many bytes all instances stream from memory together (the
    partitioner balances on it), `args` the template parameters (buffers as
    symbol references, weights by state-dict name, dimensions, tile sizes).
    The arguments follow the kind's specs in the dialect's registry
    (mk/Dialect/Schedule/TaskKinds.h: each argument's type, when it is
    required, and, for a buffer argument, how the task accesses the buffer
    it names): the task's accesses (`taskAccesses`) are what its buffer
    arguments say, plus `reads`, `writes` and `accumulates`, which name only
    what no argument does (an `opaque` task's accesses, seen only by the
    passes that read accesses and counters). An accumulated buffer must have
    been written (zeroed) before.

    `cut_blocks` (set by `schedule-partition-work` where it balanced the
    task into the blocks its phase leaves idle): the blocks the task's cut
    was chosen for, which the pass, run again, cuts it for again; it then
    moves no task between phases of a kernel whose counters are placed.

    ```mlir
    schedule.w4a16_gemv "l0.o_proj" {op = "graph.linear_w4a16",
        count = 128 : i64, partition = "split_k", bytes = 4718592 : i64,
        args = {weights = ["l0.o_proj"], outputs = [@l0.attn_acc], n = [2304],
                k = 4096 : i64, group = 128 : i64, input = @l0.kda_o,
                epilogue = "atomic_f32"}}
    ```
  }];
  let arguments = (ins
    StrAttr:$name,
    DefaultValuedAttr<I64Attr, "1">:$count,
    DefaultValuedStrAttr<StrAttr, "">:$op,
    DefaultValuedStrAttr<StrAttr, "">:$partition,
    DefaultValuedAttr<I64Attr, "0">:$bytes,
    DefaultValuedAttr<Schedule_BufferRefs, "{}">:$reads,
    DefaultValuedAttr<Schedule_BufferRefs, "{}">:$writes,
    DefaultValuedAttr<Schedule_BufferRefs, "{}">:$accumulates,
    DefaultValuedAttr<DictionaryAttr, "{}">:$args,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$cut_blocks);
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

def Schedule_ResidualRmsnormOp : Schedule_TaskBase<"residual_rmsnorm", "ResidualRmsnorm",
    "residual add and RMSNorm, recomputed by every block into shared memory">;
def Schedule_W4A16GemvOp : Schedule_TaskBase<"w4a16_gemv", "W4A16Gemv",
    "W4A16 matrix-vector product tiles of one or more weights sharing an input">;
def Schedule_Bf16RowsOp : Schedule_TaskBase<"bf16_rows", "Bf16Rows",
    "dot products of bf16 weight rows with the input (router, beta)">;
def Schedule_KdaHeadChunkOp : Schedule_TaskBase<"kda_head_chunk", "KdaHeadChunk",
    "short convolutions and the gated delta rule over a chunk of a KDA head's state">;
def Schedule_ConvCommitOp : Schedule_TaskBase<"conv_commit", "ConvCommit",
    "the KDA short convolutions' windows shifted by the new token">;
def Schedule_ZeroF32Op : Schedule_TaskBase<"zero_f32", "ZeroF32",
    "zeroes an fp32 accumulator">;
def Schedule_FinalResidualOp : Schedule_TaskBase<"final_residual", "FinalResidual",
    "the block's output: the last residual add">;
def Schedule_MlaRopeAppendOp : Schedule_TaskBase<"mla_rope_append", "MlaRopeAppend",
    "MLA RoPE of queries and key, the new latent row appended to the cache">;
def Schedule_MlaQAbsorbOp : Schedule_TaskBase<"mla_q_absorb", "MlaQAbsorb",
    "MLA queries absorbed into the latent space (W_kv_b's key part)">;
def Schedule_MlaAttentionChunkOp : Schedule_TaskBase<"mla_attention_chunk", "MlaAttentionChunk",
    "MLA attention over a chunk of cache rows for a group of heads (partial softmax sums)">;
def Schedule_MlaCombineWvOp : Schedule_TaskBase<"mla_combine_wv", "MlaCombineWv",
    "MLA partials merged and W_kv_b's value part applied, per head and latent slice">;
def Schedule_MoeGateUpOp : Schedule_TaskBase<"moe_gate_up", "MoeGateUp",
    "MoE expert gate and up projection tiles (fp32 sums)">;
def Schedule_MoeDownOp : Schedule_TaskBase<"moe_down", "MoeDown",
    "MoE expert down projection tiles of silu(gate) * up, weighted by the router">;
def Schedule_GqaRopeAppendOp : Schedule_TaskBase<"gqa_rope_append", "GqaRopeAppend",
    "GQA q and k heads normalized and rotated, the new key and value rows appended">;
def Schedule_GqaAttentionChunkOp : Schedule_TaskBase<"gqa_attention_chunk", "GqaAttentionChunk",
    "GQA attention of one kv head's query heads over a chunk of cache rows (partial softmax sums)">;
def Schedule_GqaCombineOp : Schedule_TaskBase<"gqa_combine", "GqaCombine",
    "GQA partials of the chunks merged per query head, rounded to bf16">;
def Schedule_OpaqueTaskOp : Schedule_TaskBase<"opaque", "Opaque",
    "a task the analysis passes see only through its accesses, counters and barriers">;

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
    prologue, once its weight copies are requested, so that its weight
    stream runs under the wait (schedule-prologue-waits): only a
    `moe_down` task, and at most one such wait per task.

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
