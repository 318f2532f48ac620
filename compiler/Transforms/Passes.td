//===- Passes.td - Graph -> schedule passes ----------------*- tablegen -*-===//
//
// Pipeline order (the "schedule" stage, SchedulePipeline.cpp):
// graph-fuse-projections, graph-absorb-mla, schedule-form-phases,
// schedule-partition-work, the three opt-in folds (schedule-fuse-kda-o-proj,
// schedule-fuse-kda-gated-norm, schedule-fuse-argmax),
// schedule-tile-weights, schedule-prefetch-weights,
// schedule-barriers-to-counters, schedule-poll-router-logits,
// schedule-prologue-waits,
// schedule-deal-tasks, schedule-plan-workspace (schedule-print-summary is
// mk-opt's alone). docs/pipeline.md shows each one's decision on the
// Kimi-Linear unit.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TRANSFORMS_PASSES_TD
#define MK_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def GraphFuseProjections : Pass<"graph-fuse-projections", "::mlir::ModuleOp"> {
  let summary = "Group sibling projections of one input into one grouped GEMV";
  let description = [{
    Linears (`graph.linear_w4a16`, `graph.linear_bf16`) that read the same
    value are marked with one `schedule.fusion_group` name: phase formation
    lowers the group to tasks of one phase that share the input staged in
    shared memory (KDA q/k/v/g + beta, MLA q_proj + kv_a), ordered so that
    the tiles one consumer unit needs (a KDA head) are contiguous. Not
    grouped: a projection feeding a residual add (it accumulates in fp32
    on its own); W4A16 siblings of different quantization group sizes form
    one group per size (bf16 ones join the first). Names are the first
    W4A16 member's weight + `.group`, made unique; marks already in the
    input are replaced.

    ```mlir
    %q = graph.linear_w4a16 %n, @"blocks.0.attn.q_proj" {schedule.fusion_group = "blocks.0.attn.q_proj.group"} : ...
    ```
  }];
  let dependentDialects = ["::mk::graph::GraphDialect"];
}

def GraphAbsorbMla : Pass<"graph-absorb-mla", "::mlir::ModuleOp"> {
  let summary = "Absorb W_kv_b into the MLA query and output";
  let description = [{
    Marks each `graph.mla_attention` `schedule.absorbed`: it is lowered to
    q_abs[h] = W_k,h q_nope[h] (key half), attention of q_abs against the
    latent cache rows themselves, and the value half applied to the
    attention-weighted latent per head. `c_kv @ W_kv_b` ([L, Hm*(nope+v)]) is
    never materialized; per step the weight is read once instead of once per
    cache row. Phase formation rejects unabsorbed MLA attention.
  }];
  let dependentDialects = ["::mk::graph::GraphDialect"];
}

def ScheduleFormPhases : Pass<"schedule-form-phases", "::mlir::ModuleOp"> {
  let summary = "Lower the graph step to a schedule.kernel of phases";
  let description = [{
    Lowers every graph op of `@decode_step` to tasks (template calls) and the
    SSA values between them to buffers (workspace, shared memory, or the
    decode state), then places the tasks with planPhases: RMSNorms (with the
    residual add before them) are recomputed by every block into shared
    memory, so they need no barrier of their own; every other cross-block
    dependency gets the fewest grid barriers the dependency chains allow.
    fp32 accumulators (split-K and expert sums) get zeroing tasks. The graph
    function and declarations are replaced by the kernel.
  }];
  let dependentDialects = ["::mk::schedule::ScheduleDialect"];
  let options = [
    Option<"threads", "threads", "int64_t", "256",
           "threads per block of the emitted kernel">,
    Option<"kernelName", "kernel-name", "std::string", "\"\"",
           "kernel symbol (default: mk_<module name>)">,
    Option<"debugCapture", "debug-capture", "bool", "false",
           "also write every phase's intermediates to the debug arena "
           "(also set by a `mk.debug_capture` attribute on the module)">,
    Option<"maxSharedBytes", "max-shared-bytes", "int64_t", "101376",
           "shared memory one block may use on the target (the emitter "
           "refuses a kernel that needs more); default: sm_120's 99 KB, "
           "which sm_90's 227 KB also covers; 0: no limit">,
    Option<"mlaPartials", "mla-partials", "std::string", "\"bf16\"",
           "the element type of the MLA attention's partial sums, which the "
           "combine merges: bf16 (the default: half the bytes; their "
           "rounding averaged over the chunks) or f32 (the spec's)">,
  ];
}

def SchedulePartitionWork : Pass<"schedule-partition-work", "::mlir::ModuleOp"> {
  let summary = "Cut each task into instances balanced by streamed bytes";
  let description = [{
    For every task, enumerates the legal cuts (GEMV column tiles, split-K
    slices aligned with the consumer's units, KDA state column chunks, expert
    tiles) and picks the one with the lowest estimated time on `target-sms`
    SMs (waves times bytes per task plus a fixed per-task overhead; bytes
    read in row pieces shorter than `full-segment-bytes` cost more). Sets
    `count`, `bytes` and the tile-size arguments; records each task's grain
    (`grain` unit name, `grain_per` instances per unit) for counter placement.

    Then (`balance-phases`, on by default) it balances across phases: the
    ASAP placement of `schedule-form-phases` puts a task beside its phase's
    main work even where what consumes it runs phases later. Visiting phases
    and their tasks last to first, a task whose reads, writes and
    accumulations allow it moves to the later phase (before the first one
    with a task that must follow it) where, cut again for the blocks that
    phase leaves idle, it lowers the sum of the two phases' busiest-block
    loads most (instances dealt round-robin in task order, each costing its
    bytes plus `task-overhead-bytes`); it goes last in that phase. Tasks
    that read or write an every-block value in shared memory, every-block
    tasks and MLA attention chunks stay; with `recut-overflowing-phases`
    such a task is still cut again in its own phase where that phase holds
    more instances than blocks (judged by the load of the tasks that must
    stay there), and then the phase's later such tasks for the blocks left.
  }];
  let options = [
    Option<"targetSms", "target-sms", "int64_t", "264",
           "concurrent blocks to balance the work for: SMs x blocks per SM "
           "(H200: 132 x 2; the emitted kernel fits two blocks per SM)">,
    Option<"overheadBytes", "task-overhead-bytes", "int64_t", "24576",
           "fixed cost of one task, in bytes-streamed equivalents (0..2^40)">,
    Option<"attentionChunks", "attention-chunks", "int64_t", "0",
           "most context chunks of an attention (0: GQA 64; MLA as many as "
           "fill target-sms once with its head groups' tasks, a power of two "
           "up to 128: the unit's 2 groups of 16 heads take 128)">,
    Option<"attentionHeadGroup", "attention-head-group", "int64_t", "16",
           "most heads per MLA attention task (1-16; the largest divisor of "
           "the heads up to this is taken): the tensor-core form's mma has 16 "
           "A rows; 16 heads read each cache row half as often as 8">,
    Option<"attentionSubRows", "attention-sub-rows", "int64_t", "16",
           "cache rows per sub-chunk of an MLA attention task: 16, or 32 "
           "(up to 8 heads per task: attention-head-group=8; two ring slots of 32 rows instead of "
           "three of 16: half the block barriers and softmax passes per row)">,
    Option<"attentionQueryParts", "attention-query-parts", "int64_t", "1",
           "bf16 parts the MLA attention carries its absorbed queries and "
           "probabilities in where a task has 9-16 heads: 1 (bf16, one mma "
           "per step; docs/pipeline.md, the error budget) or 2 (hi + lo, ~16 "
           "significant bits, two mma per step); tasks of up to 8 heads take "
           "2 either way (the lo parts ride in the mma's spare A rows)">,
    Option<"attentionChunkRows", "attention-chunk-rows", "int64_t", "32",
           "cache rows per MLA attention chunk at least, but for rounding: "
           "at most one chunk per this many rows (a multiple of 16, up to "
           "4096), so that short contexts merge fewer partials">,
    Option<"fullSegmentBytes", "full-segment-bytes", "int64_t", "0",
           "contiguous bytes per streamed row below which a tile's bytes "
           "cost twice as much (0: no penalty; 128 measured 2% slower on the "
           "H200, docs/perf-notes.md)">,
    Option<"balance", "balance-phases", "bool", "true",
           "move tasks whose consumers run phases later into a later phase "
           "with idle blocks, cut again for those blocks, where that lowers "
           "the two phases' busiest-block loads">,
    Option<"phaseBudget", "phase-budget", "bool", "true",
           "cut each task for the blocks its phase's earlier tasks leave "
           "(target-sms less their instances, at least a quarter of it) "
           "instead of the whole grid: the MoE norm phase's shared-expert "
           "gate/up then takes 192 tasks beside the router's 64, not 256 "
           "that leave 57 blocks running two (-3.8 us per token at context "
           "2048, perf notes #89)">,
    Option<"recutOverflow", "recut-overflowing-phases", "bool", "false",
           "with balance-phases, where a phase holds more instances than "
           "blocks, also cut again in its phase a task that reads or writes "
           "an every-block value in shared memory (a 256-row router beside "
           "the shared expert's gate/up: 256 + 64 instances, 56 blocks "
           "running two), then (with phase-budget) the phase's later tasks "
           "for the blocks left; opt-in: the 48B measured 50 us slower with "
           "it (perf notes #186)">,
    Option<"balanceSpread", "balance-spread", "bool", "false",
           "with balance-phases, also move tasks where that only spreads the "
           "phases' loads more evenly (the zeroing tasks; measured 2.6 us "
           "slower on the unit, perf notes #72, and a 27- or 40-layer spec's "
           "kernel body then spills ~200-380 B on sm_90, 0 B without)">,
  ];
}

def ScheduleFuseKdaGatedNorm : Pass<"schedule-fuse-kda-gated-norm", "::mlir::ModuleOp"> {
  let summary = "Fold each released KDA layer's gated output norm into the "
                "output projection's input staging";
  let description = [{
    The released KDA layer normalizes each head's output before its output
    projection: `kda_gated_norm` (one task per head) writes z = bf16(o *
    rsqrt(mean(o^2) + eps) * w * sigmoid(gate)), and the projection's
    split-K GEMV stages its k-slice of z. Each slice is whole heads, so the
    GEMV can compute those heads' norms while it stages its input: it reads
    o and the gate instead (`gated_norm_gate`, `gated_norm_weight`,
    `gated_norm_eps`, `gated_norm_head_dim` on the `w4a16_gemv`, whose
    `input` becomes o), the norm task goes, and with it its phase, its
    counters (schedule-barriers-to-counters places the GEMV's waits on the
    gated delta and the gate instead) and the z buffer: one dependent hop
    less per KDA layer. The staged values are the norm task's, bit for bit
    (templates/kda.cuh, kda_gated_norm_stage). Applies where the norm's
    output is read by that one GEMV only, with one weight, from offset 0,
    its k-slices (k / ksplit) whole heads, its input and gate bf16 outside
    shared memory. Opt-in (`enabled=true`): measured no faster on an H100
    (perf notes #168: 0 us on the released forms at 2048, -3.4 at 16384,
    +6.8 us on the 48B).
    Runs after schedule-partition-work (which sets `ksplit`) and before
    schedule-barriers-to-counters; a rewrite pattern on the norm
    (FoldGatedNormIntoStaging), applied by the greedy driver.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "false",
           "fold the norms (off by default: measured no faster, perf notes "
           "#168)">,
  ];
}

def ScheduleFuseArgmax : Pass<"schedule-fuse-argmax", "::mlir::ModuleOp"> {
  let summary = "Fold a whole model's greedy argmax into the LM head's tiles";
  let description = [{
    A whole model's last task, `argmax` (slices of the logits, each merging
    its best (value, index) key into a scratch key, the last writing the
    index), waits for every LM-head tile and reads the logits back. Each
    LM-head tile can merge the argmax of the columns it has just stored
    instead: the GEMV gets `argmax_output` and `argmax_scratch`, its tiles
    merge into the scratch with the argmax task's key and the last of them
    writes the index, and the argmax task goes, with a phase it leaves
    empty (and the barrier in front of it) and its counters
    (schedule-barriers-to-counters places none for it then): one dependent
    hop less at the end of every token. Both forms read the stored bf16
    logits and take the first index of the largest, so the index is the
    same. Applies where one W4A16 GEMV alone writes the argmax's input, of
    one weight, stored as bf16 (not atomic_f32 sums), in whole tiles
    (ksplit 1, no unit_cols). On by default since it measured -6.6 us per
    token on the unit-width whole model on an H100 (perf notes #171, three
    alternating rounds at 2048); `enabled=false` keeps the argmax task.
    Runs after schedule-partition-work (which sets `ksplit`) and
    before schedule-barriers-to-counters; a rewrite pattern on the argmax
    (FoldArgmaxIntoTiles), applied by the greedy driver.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "true",
           "fold the argmax into the LM head's tiles (the default; false "
           "keeps the argmax task)">,
  ];
}

def ScheduleFuseKdaOProj : Pass<"schedule-fuse-kda-o-proj", "::mlir::ModuleOp"> {
  let summary = "Fold each KDA output projection into the gated-delta tasks";
  let description = [{
    The gated-delta task of head h, value columns [j0, j0 + chunk), makes
    exactly rows h * head_dim + j0 .. of the output projection's input:
    it multiplies them with those rows of W_o itself (staged into shared
    memory when the task starts, so they land under the state update) and
    adds the products to the projection's fp32 sums with atomics. The
    projection's split-K GEMV task goes (`o_weight`, `o_acc`, `o_n` on the
    `kda_head_chunk` task; its `accumulates` gain the sums), and with it a
    phase it leaves empty and that phase's barrier: one dependent stage
    less per KDA layer. Needs `chunk` a multiple of 16 rows, N a multiple
    of 128 and groups of 16k rows (else the GEMV stays). Same arithmetic as
    the GEMV tiles (each weight dequantized to bf16 as the spec, fp32
    sums); only the order of the fp32 additions differs. Off by default:
    measured on the H200 (docs/perf-notes.md, #60-#62) the folded step is
    no faster (0.2821 vs 0.2763 ms per token; 0.2767 with the atomics
    removed): the row-slice product adds 3-4 us to every gated-delta task,
    and 256 tasks x N fp32 atomics into one sum cost ~3 us more, which is
    what the projection's own phase cost.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "false",
           "fold the projections (measured no faster on the H200, off by "
           "default)">,
  ];
}

def SchedulePollRouterLogits : Pass<"schedule-poll-router-logits", "::mlir::ModuleOp"> {
  let summary = "Let routed expert tasks poll the router's logits instead of waiting for its counter";
  let description = [{
    A routed expert task (gate/up or down) waits for the router's counter
    (a release fence per router row, the signal's trip to L2, the poll
    that sees it) and then reads the logits, one more L2 round trip,
    before it can choose its expert. With `enabled=true` (the default since
    session 35) the router stores
    each logit for polling (`polled_output` on its `bf16_rows` task: never
    the all-zero bits, one relaxed store; +0.0 as -0.0), the routed tasks
    poll each logit until it is not zero (`poll_logits`, moe_topk's
    polling form), their waits on the router's counter go (and the
    counter, where nothing else waits on it), and a `zero_f32` task
    (`<router>.clear`) in the kernel's first phase clears the logits a
    grid barrier before the router writes them. Applies where the logits
    are a workspace buffer of whole 4-byte words that the router alone
    writes and routed expert tasks alone read, with a grid barrier between
    the first phase and the router. Runs after
    schedule-barriers-to-counters. Measured -6.3 to -8.1 us per unit token
    on an H100 (perf notes #167, three alternating rounds at 2048 and
    16384; -4.9 / -5.2 in #171) and -2.8 / -0.7 on the released forms (64
    experts, #171), but +23 us on the released 48B model's 256 (#171; its
    MoE bands' phase profile is unchanged, #175, while its kernel body
    spills 1128 B on sm_90 against 208 B counted: the likely cost). So a
    router of more than `max-experts` rows keeps its
    counter; `enabled=false` keeps every router's.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "true",
           "poll the router's logits (the default; false keeps the router's "
           "counter)">,
    Option<"maxExperts", "max-experts", "int64_t", "64",
           "poll only routers of at most this many experts (logit rows); a "
           "larger one keeps its counter (256 measured slower polled, perf "
           "notes #171)">,
  ];
}

def ScheduleTileWeights : Pass<"schedule-tile-weights", "::mlir::ModuleOp"> {
  let summary = "Choose the storage of W4A16 weights: packed tensor-core tiles by default";
  let description = [{
    `layout=packed` (the default): every int4 weight read only by 128- or
    64-wide W4A16 GEMV and expert tiles whose k-slices are whole steps (1 KB:
    8 row pairs at 128 wide, 16 at 64) is stored tile by tile, each tile's
    steps in the tensor-core tile's lane order (`tile` on the weight's
    w_q, scales and zeros, `order` on its w_q), which the tile streams; other weights keep the spec's storage. `layout=tiled` stores every weight read only by tiles of one
    width, whose column count that width divides, tile-contiguous (rows,
    scales and zeros of a tile together) without the lane order.
    `layout=row-major` keeps the spec's storage everywhere. With
    `layout=packed`, `arithmetic` picks the packed tiles' math and order
    (the w_q's `order`, the kernel's `packed_arithmetic`): `folded` (the
    default; order `mma`, 1 KB steps) takes each weight as the exact
    integer 128 + q and subtracts (128 + z) times the group's sum of x per
    group and column before applying its scale once to the fp32 sum;
    `scaled` (same storage) takes each weight as the exact integer q - z
    and applies the group's scale once per column;
    `exact` (same storage) dequantizes every weight to bf16
    as the spec does, its rounding included; `int8` quantizes x per
    group into two int8 halves (~16 significant bits) and runs exact integer
    dot products on raw nibbles (32-row steps: 2 KB at 128 wide, 1 KB at 64;
    only weights whose k-slices are at most 3584 rows of groups of at most
    128 rows, multiples of 32, are packed). `scaled`, `folded` and `int8` do not
    round each weight to bf16 as the spec does: docs/pipeline.md has their
    error budgets. `expert-arithmetic` gives the MoE experts' weights (read
    by gate/up and down tiles) their own arithmetic, e.g. `int8` experts
    beside `folded` projections: each weight's `order` says which tile
    streams it. The emitter
    addresses moved weights per tile, the manifest marks them (`tile`,
    `order`), and the runtime repacks them when they are bound.
  }];
  let options = [
    Option<"layout", "layout", "std::string", "\"packed\"",
           "weight storage: packed (default), tiled or row-major (the spec's)">,
    Option<"arithmetic", "arithmetic", "std::string", "\"folded\"",
           "packed tiles' arithmetic: folded (default; exact 128 + q, each "
           "group's zero point and scale applied once per column to fp32 "
           "sums), scaled (exact q - z, the scale per group), exact (the "
           "spec's bf16 dequantization per weight) or int8 (x quantized per "
           "group to ~16 bits, integer dot products, scales per group); only "
           "exact rounds each weight to bf16 as the spec does">,
    Option<"expertArithmetic", "expert-arithmetic", "std::string", "\"\"",
           "the MoE expert tiles' arithmetic (gate/up and down), as "
           "`arithmetic` takes it; empty (the default): `arithmetic`. Only "
           "int8 mixes with another arithmetic (the tensor-core tiles' math "
           "is one per kernel)">,
  ];
}

def SchedulePrefetchWeights : Pass<"schedule-prefetch-weights", "::mlir::ModuleOp"> {
  let summary = "Start weight streams early: at phase entry, and (opt-in) L2 prefetch of later phases";
  let description = [{
    Weights never depend on a previous phase, only activations do. With
    `streams=true` the kernel gets `early_weight_streams`: each
    block starts the weight copies of its first packed GEMV instance of a phase
    at the phase's entry, before its counter waits (and the every-block
    norm's arithmetic or the whole norm, as below).
    `norm-free-streams=true` does the same only in the phases without an
    every-block norm (`early_weight_streams` on those phases), and
    `norm-streams=true` only in the phases with one (after a grid barrier).
    Where a phase has the every-block norm in its one-sum form, rounded
    once, with the resident residual, the emitter asks for the streams
    between the norm's loads and its arithmetic (which needs no work area
    and loads nothing more), so that the norm's loads do not queue behind
    them; before a norm of another form, which then loads through
    registers (a cp.async wait would wait for the stream's groups too). All
    three are off: with the streams before every norm they measured slower
    (docs/perf-notes.md #87, #129, #196: the norm's and counters' small
    loads queue behind the streams), and with them between the norm's loads
    and its arithmetic too (#212: +15 us; #213, the integer tile's bulk
    streams: +12 us).
    `l2-first-tasks=true` marks the phases with an every-block norm
    (`l2_first_tasks`): they start after a grid barrier, and while every
    block computes the norm the memory system would idle; instead each
    block's first GEMV instance's weights are brought into L2 meanwhile.
    `kda-state-l2=true` sets `l2_first_tasks` on the phases of KDA
    gated-delta tasks too: there the request covers each block's first
    instance's state slice and conv parameters, which do not depend on the
    projections its counters wait for.
    With `distance` > 0 each
    phase gets `l2_prefetch`: the weights that the phase `distance` phases
    later reads and that do not depend on data (every weight its tasks'
    arguments name, per the dialect's registry of task kinds: GEMV, bf16-row
    and norm weights, shared experts, MLA's W_kv_b; not routed experts,
    chosen by the router at run time). The emitted kernel has every block issue bulk L2
    prefetches of its share of them as it enters the phase, so the memory
    system streams them under the current phase's compute, counter waits
    and grid barriers instead of after them. Both are off by default:
    measured (docs/perf-notes.md, runs #30-#31), `distance=1` and `2` made
    the step ~20 us slower and `streams=true` changed nothing (0.3416 vs
    0.3397 ms per token); on the kernel of session 13 (run #81)
    `distance=1` costs 27 us per token and `l2-first-tasks=true` 12 us
    (the prefetches queue ahead of the small dependent loads the critical
    path waits on).
    `routed-tasks-l2=true` sets `l2_routed_tasks` on the phases of routed
    MoE down tiles: their weights cannot be named before the router has
    chosen the experts, but a block that computes the top-k in the gate/up
    phase knows its down tile of the next phase (the deal is fixed), and
    asks L2 for its k-slice of w_q, scales and zero points right away, so
    that they stream under the gate/up phase instead of after it.
    Inside a task, `tile-stages-ahead` (on by default: 2) sets the kernel's
    `tile_stages_ahead`: a grouped packed GEMV tile (the `folded` and
    `scaled` arithmetics') asks for that many stages of its weight ring
    before its first step and for the next one after each stage's steps,
    so that its math runs under its stream (0: the whole ring up front, as
    before session 43; 1 is refused, ptxas 13.0 miscompiles it). The
    emitter defines it as `MK_GEMV_AHEAD_STAGES`, at most the ring's
    stages (perf notes #210: -9.5 us per token at 2048 on an H100).
  }];
  let options = [
    Option<"streams", "streams", "bool", "false",
           "start each block's first packed GEMV weight stream of a phase at "
           "the phase's entry (early_weight_streams on the kernel; measured "
           "no faster, off by default)">,
    Option<"normFreeStreams", "norm-free-streams", "bool", "false",
           "start the weight stream of each block's first packed GEMV "
           "instance at the entry of every phase that has no every-block "
           "norm (early_weight_streams on those phases; the output "
           "projections, whose tasks wait for the heads they read; measured "
           "no faster, off by default)">,
    Option<"normStreams", "norm-streams", "bool", "false",
           "start the weight stream of each block's first packed GEMV "
           "instance at the entry of every phase that has an every-block "
           "norm (early_weight_streams on those phases: the q/k/v/g and MLA "
           "projections after a grid barrier)">,
    Option<"l2FirstTasks", "l2-first-tasks", "bool", "false",
           "in every phase with an every-block norm (l2_first_tasks on the "
           "phase), each block asks L2 for its first packed GEMV or bf16-row "
           "instance's weights at the phase's entry, before the norm "
           "(measured 12 us per token slower, perf notes #81; off by default)">,
    Option<"kdaStateL2", "kda-state-l2", "bool", "false",
           "in every phase of KDA gated-delta tasks (l2_first_tasks on the "
           "phase), each block asks L2 for its first instance's state slice, "
           "conv weights and windows at the phase's entry, before its counter "
           "waits (measured no faster: +1.8 us in perf notes #67, 0 in #72; "
           "off by default)">,
    Option<"routedTasksL2", "routed-tasks-l2", "bool", "false",
           "on every phase of routed MoE down tiles (l2_routed_tasks on the "
           "phase), each block that computes the router's top-k in the "
           "experts' gate/up phase asks L2 right then for its first instance "
           "of the down phase, where that is a routed down tile of "
           "tile-packed weights: its k-slice of w_q, scales and zero points "
           "(off by default; not measured yet)">,
    Option<"tileStagesAhead", "tile-stages-ahead", "int64_t", "2",
           "stages of a grouped packed GEMV tile's weight ring asked for "
           "before its first step, the next after each stage's steps "
           "(tile_stages_ahead on the kernel; 2, the default: its first "
           "steps run while its last stage is still to be asked for, 9.5 "
           "us per token faster at 2048 and 8.8 at 16384 than 0, the whole "
           "ring up front, perf notes #210; 1 is refused: ptxas 13.0 "
           "miscompiles it, #211)">,
    Option<"distance", "distance", "int64_t", "0",
           "how many phases ahead to prefetch (0, the default: none; 1 measured "
           "20-27 us per token slower, perf notes #30-#31 and #81)">,
  ];
}

def ScheduleBarriersToCounters
    : Pass<"schedule-barriers-to-counters", "::mlir::ModuleOp"> {
  let summary = "Replace grid barriers by dependency counters where possible";
  let description = [{
    A barrier goes when no task after it that depends on a task before it runs
    in every block (those would wait for the whole grid anyway). Each such
    dependency becomes a counter: per unit when producer and consumer share a
    grain (a KDA head waits for its own head's projection tiles, an expert's
    down projection for its own gate/up tiles), otherwise one counter that
    the consumer waits on in full (routed experts on the router's logits).
  }];
}

def SchedulePrologueWaits : Pass<"schedule-prologue-waits", "::mlir::ModuleOp"> {
  let summary = "Let tasks wait for their inputs after their first weight or cache loads start: MoE down tasks, MLA attention chunks and GEMVs of an input in global memory (opt-in: the MLA query absorption and combine)";
  let description = [{
    Marks `in_prologue` each counter wait of a `moe_down` task whose
    signallers write, of what the task reads, only its `sums` (the
    expert's gate and up sums; not the router's counter, where
    schedule-poll-router-logits left one, which picks the expert and so the
    weights). The emitted task then requests its weight
    copies first, waits in its tile's prologue, and stages silu(gate) * up
    after the wait (moe_down_task_waiting), so that its stream's start runs
    under the wait for the slowest gate/up tile of its expert. At most one
    wait per task (two for a GEMV with a gated-norm input: one on o, one on
    the gate). Runs after schedule-barriers-to-counters, which makes
    the waits. Measured on the H200 (docs/perf-notes.md, #102): -1.3 us per
    token at context 2048, -1.9 to -2.8 at 16384. `enabled=false` keeps
    every wait before its task.

    `attention` (on by default) marks an MLA attention chunk's wait for
    the absorbed queries (`q_abs`) too: the emitted task
    (mla_attention_chunk_task_waiting) asks for its first cache rows, then
    waits, then stages the queries (its wait for the rope/append task,
    which writes the step's new row, stays before the task); -1.8 to -3.7
    us per token at 2048, -2.6 to -5.0 at 16384 (#153). `gemv` (on by
    default) marks a W4A16 GEMV's wait for its input where the input is in
    global memory (the output projections, waiting for the KDA heads or the
    MLA combine): the tile (w4a16_gemv_tile_staged_waiting) asks for its
    first weights, then waits, then stages the input; a further -3.0 to
    -5.6 us at 2048, -1.8 to -5.6 at 16384 (#155). `absorb=true` (opt-in)
    marks an MLA query absorption's wait for the projected queries (`q`):
    the task (mla_q_absorb_task_waiting) loads its first rows of W_kv_b,
    then waits, then stages q_nope; measured no faster on top of the other
    two (#155). `combine=true` (opt-in) marks an MLA combine's wait for the
    attention chunks' partials (`part_m`, `part_l`, `part_acc`): the task
    (mla_combine_wv_task_waiting) asks for its first W_v weights, then
    waits, then merges the partials, staged in the GEMV ring's later
    stages, which a slice's W_v rows leave empty (within noise on an H100:
    -1.0 to +2.3 us at 2048, -1.3 to -3.0 at 16384, #167); the
    form that read them from L2 (-DMK_COMBINE_WAITING_UNSTAGED) measured
    0.2 to 4.1 us slower (#158).
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "true",
           "move qualifying MoE down waits into the task's prologue">,
    Option<"attention", "attention", "bool", "true",
           "also move MLA attention chunks' waits for the absorbed queries "
           "into the task's prologue (after its first cache rows are asked for)">,
    Option<"gemv", "gemv", "bool", "true",
           "also move W4A16 GEMV tasks' waits for an input in global memory "
           "into the tile's prologue (after its first weights are asked for)">,
    Option<"absorb", "absorb", "bool", "false",
           "also move MLA query absorption tasks' waits for the projected "
           "queries into the task's prologue (after its first weights are loaded)">,
    Option<"combine", "combine", "bool", "false",
           "also move MLA combine tasks' waits for the attention chunks' "
           "partials into the task's prologue (after its first W_v weights are "
           "asked for)">,
  ];
}

def ScheduleDealTasks : Pass<"schedule-deal-tasks", "::mlir::ModuleOp"> {
  let summary = "Continue each phase's round-robin deal of task instances where the last stopped";
  let description = [{
    Every phase deals its task instances to the blocks round-robin. Started
    at block 0 each time, a phase's first instances land on the blocks that
    also got the previous phase's extra ones (a 400-instance phase on 264
    blocks gives blocks 0-135 two), and those blocks start late. This pass
    sets each phase's `deal_offset` to the number of grid instances of the
    kernel's earlier phases, so that the deal goes on where the last phase
    stopped: the MoE down phase after a 400-instance gate/up phase starts
    at block 136. Measured 11.5 us per token faster on the H200
    (docs/perf-notes.md, run #47). `continue=false` deals every phase from
    block 0 (deal_offset 0).
  }];
  let options = [
    Option<"continueDeal", "continue", "bool", "true",
           "continue the deal across phases (false: every phase from block 0)">,
  ];
}

def SchedulePlanWorkspace : Pass<"schedule-plan-workspace", "::mlir::ModuleOp"> {
  let summary = "Assign workspace offsets by liveness";
  let description = [{
    Workspace buffers live from the first to the last segment (barrier
    interval) that touches them; buffers live in disjoint segments share
    memory. Sets every buffer's `offset`, the kernel's `workspace_bytes`
    and the counters' `base` indices.
  }];
}

def SchedulePrintSummary : Pass<"schedule-print-summary", "::mlir::ModuleOp"> {
  let summary = "Print phases, barriers, counters, tasks and bytes per phase";
  let description = [{
    Prints a table of the kernel's phases to stderr (or `-o FILE`): per
    phase its tasks, instance counts and bytes streamed, the barriers and
    counters. Does not change the IR.
  }];
  let options = [
    Option<"output", "o", "std::string", "\"-\"",
           "where the summary goes ('-' is stderr)">,
  ];
}

#endif // MK_TRANSFORMS_PASSES_TD
