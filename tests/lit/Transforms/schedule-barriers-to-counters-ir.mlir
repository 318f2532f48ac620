// RUN: mk-opt %s -split-input-file --schedule-barriers-to-counters | FileCheck %s

// The tasks are of kind `opaque` (no argument specs; docs/schedule.md): the
// pass reads only accesses, grains and counts.

// schedule-barriers-to-counters on hand-written schedules. A grid barrier
// goes unless an every_block task after it conflicts with a task before it
// (back to the previous kept barrier): that wait is a whole-grid one anyway.
// The pass has no options. Each conflicting pair across a removed barrier
// (a write, then a read, write or accumulate; an accumulate, then a read or
// write; a read, then a write or accumulate) becomes a counter wait. When
// producer and consumer name the same `grain`, the counter is per unit
// (@P.ready: count / grain_per counters, each signaled by grain_per producer
// instances; consumer instance j waits on unit j / grain_per, times
// grain_span units from there); otherwise one counter (@P.done) that the
// consumer waits on until every producer instance has signaled it. Counters
// go after the buffers; one signal per counter, one wait per counter and
// consumer. Per-block shared memory is no dependency.

// Same grain: a head waits for its own head's projection tiles (2 per head,
// of q and k, one wait for both) and beta row (1 per head).
// CHECK-LABEL: schedule.kernel @per_unit
// CHECK: schedule.buffer @o
// CHECK-NEXT: schedule.counter @q_proj.ready {size = 4 : i64}
// CHECK-NEXT: schedule.counter @beta.ready {size = 4 : i64}
// CHECK-NEXT: schedule.phase "proj" {
// CHECK: schedule.signal @q_proj.ready {divisor = 2 : i64, task = "q_proj"}
// CHECK-NEXT: schedule.signal @beta.ready {task = "beta"}
// CHECK-NEXT: }
// CHECK-NEXT: schedule.phase "attn" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "kda"
// CHECK-NEXT: schedule.wait @q_proj.ready {divisor = 2 : i64, target = 2 : i64, task = "kda"}
// CHECK-NEXT: schedule.wait @beta.ready {divisor = 2 : i64, target = 1 : i64, task = "kda"}
// CHECK-NEXT: }
// CHECK-NEXT: }
schedule.kernel @per_unit attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @k {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @beta {dtype = "bf16", shape = array<i64: 4>}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 128>}
  schedule.phase "proj" {
    schedule.opaque "q_proj" {count = 8 : i64, reads = [@x], writes = [@q, @k], grain = "head", grain_per = 2 : i64, args = {input = "x", outputs = ["q", "k"]}}
    schedule.opaque "beta" {count = 4 : i64, reads = [@x], writes = [@beta], grain = "head", grain_per = 1 : i64, args = {input = "x", output = "beta"}}
  }
  schedule.barrier
  schedule.phase "attn" {
    schedule.opaque "kda" {count = 8 : i64, reads = [@q, @k, @beta], writes = [@o], grain = "head", grain_per = 2 : i64, args = {beta = "beta", k = "k", o = "o", q = "q"}}
  }
}

// -----

// No common grain: routed experts wait for the whole router (8 signals on
// one counter), and for the zeroing of their sums (a write before an
// accumulate).
// CHECK-LABEL: schedule.kernel @whole
// CHECK: schedule.counter @sums.zero.done {size = 1 : i64}
// CHECK-NEXT: schedule.counter @router.done {size = 1 : i64}
// CHECK: schedule.signal @sums.zero.done {task = "sums.zero"}
// CHECK-NEXT: schedule.signal @router.done {divisor = 8 : i64, task = "router"}
// CHECK-NOT: schedule.barrier
// CHECK: schedule.wait @sums.zero.done {divisor = 16 : i64, target = 1 : i64, task = "gate_up"}
// CHECK-NEXT: schedule.wait @router.done {divisor = 16 : i64, target = 8 : i64, task = "gate_up"}
schedule.kernel @whole attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @logits {dtype = "bf16", shape = array<i64: 8>}
  schedule.buffer @sums {dtype = "f32", shape = array<i64: 512>}
  schedule.phase "router" {
    schedule.opaque "sums.zero" {writes = [@sums], args = {buffer = "sums"}}
    schedule.opaque "router" {count = 8 : i64, reads = [@x], writes = [@logits], args = {input = "x", output = "logits"}}
  }
  schedule.barrier
  schedule.phase "experts" {
    schedule.opaque "gate_up" {count = 16 : i64, reads = [@x, @logits], accumulates = [@sums], grain = "slot", grain_per = 8 : i64, args = {logits = "logits", sums = "sums"}}
  }
}

// -----

// One producer, two consumers: the one of its grain waits per unit, the
// other (no grain) for all of it; a split-K consumer whose slices span 2
// heads (grain_span) waits on 2 consecutive unit counters.
// CHECK-LABEL: schedule.kernel @two_consumers
// CHECK: schedule.counter @q_proj.ready {size = 4 : i64}
// CHECK-NEXT: schedule.counter @q_proj.done {size = 1 : i64}
// CHECK-NEXT: schedule.counter @kda.ready {size = 4 : i64}
// CHECK: schedule.signal @q_proj.ready {divisor = 2 : i64, task = "q_proj"}
// CHECK-NEXT: schedule.signal @q_proj.done {divisor = 8 : i64, task = "q_proj"}
// CHECK: schedule.wait @q_proj.ready {target = 2 : i64, task = "kda"}
// CHECK-NEXT: schedule.wait @q_proj.done {divisor = 2 : i64, target = 8 : i64, task = "commit"}
// CHECK-NEXT: schedule.signal @kda.ready {task = "kda"}
// CHECK: schedule.wait @kda.ready {divisor = 4 : i64, span = 2 : i64, target = 1 : i64, task = "o_proj"}
schedule.kernel @two_consumers attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @conv {dtype = "bf16", shape = array<i64: 3, 128>, space = "state"}
  schedule.buffer @q {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @out {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "proj" {
    schedule.opaque "q_proj" {count = 8 : i64, reads = [@x], writes = [@q], grain = "head", grain_per = 2 : i64, args = {input = "x", outputs = ["q"]}}
  }
  schedule.barrier
  schedule.phase "attn" {
    schedule.opaque "kda" {count = 4 : i64, reads = [@q], writes = [@o], grain = "head", grain_per = 1 : i64, args = {o = "o", q = "q"}}
    schedule.opaque "commit" {count = 2 : i64, reads = [@q], writes = [@conv], args = {cq = "conv", q = "q"}}
  }
  schedule.barrier
  schedule.phase "out" {
    schedule.opaque "o_proj" {count = 8 : i64, reads = [@o], writes = [@out], grain = "head", grain_per = 4 : i64, grain_span = 2 : i64, args = {input = "o", outputs = ["out"]}}
  }
}

// -----

// Kept: an every_block task (a norm) reads what the split-K GEMV
// accumulated, and no counter is made for that pair; the barrier between
// the zeroing and the GEMV has no every_block task after it: a counter.
// CHECK-LABEL: schedule.kernel @every_block_consumer
// CHECK: schedule.counter @acc.zero.done {size = 1 : i64}
// CHECK-NEXT: schedule.phase "zero"
// CHECK-NOT: schedule.barrier
// CHECK: schedule.phase "o_proj"
// CHECK: schedule.wait @acc.zero.done {divisor = 8 : i64, target = 1 : i64, task = "o_proj"}
// CHECK-NEXT: }
// CHECK-NEXT: schedule.barrier
// CHECK-NEXT: schedule.phase "norm"
// CHECK-NOT: schedule.wait
schedule.kernel @every_block_consumer attributes {threads = 256 : i64} {
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 128>, space = "io"}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.phase "zero" {
    schedule.opaque "acc.zero" {writes = [@acc], args = {buffer = "acc"}}
  }
  schedule.barrier
  schedule.phase "o_proj" {
    schedule.opaque "o_proj" {count = 8 : i64, reads = [@o], accumulates = [@acc], args = {input = "o", outputs = ["acc"]}}
  }
  schedule.barrier
  schedule.phase "norm" {
    schedule.opaque "norm" {partition = #schedule.partition<every_block>, reads = [@acc], writes = [@xs], args = {acc = "acc", xs = "xs"}}
  }
}

// -----

// Kept: an every_block task before the barrier writes a (non-shared)
// residual that a grid task after it reads.
// CHECK-LABEL: schedule.kernel @every_block_producer
// CHECK-NOT: schedule.counter
// CHECK: schedule.barrier
// CHECK-NEXT: schedule.phase "use"
// CHECK-NOT: schedule.wait
schedule.kernel @every_block_producer attributes {threads = 256 : i64} {
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @res {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "norm" {
    schedule.opaque "norm" {partition = #schedule.partition<every_block>, reads = [@h], writes = [@res, @xs], args = {base = "h", out = "res", xs = "xs"}}
  }
  schedule.barrier
  schedule.phase "use" {
    schedule.opaque "use" {count = 4 : i64, reads = [@res], writes = [@y], args = {base = "res", out = "y"}}
  }
}

// -----

// Removed without a counter: nothing after the barrier conflicts with what
// is before it but per-block shared memory, which a block's every_block
// norm rewrites after its own readers.
// CHECK-LABEL: schedule.kernel @shared_only
// CHECK-NOT: schedule.counter
// CHECK: schedule.phase "a"
// CHECK-NOT: schedule.signal
// CHECK-NOT: schedule.barrier
// CHECK: schedule.phase "b"
// CHECK-NOT: schedule.wait
schedule.kernel @shared_only attributes {threads = 256 : i64} {
  schedule.buffer @h {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @b {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "a" {
    schedule.opaque "norm_a" {partition = #schedule.partition<every_block>, reads = [@h], writes = [@xs], args = {base = "h", xs = "xs"}}
    schedule.opaque "proj_a" {count = 4 : i64, reads = [@xs], writes = [@a], args = {input = "xs", outputs = ["a"]}}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.opaque "norm_b" {partition = #schedule.partition<every_block>, reads = [@h], writes = [@xs], args = {base = "h", xs = "xs"}}
    schedule.opaque "proj_b" {count = 4 : i64, reads = [@xs], writes = [@b], args = {input = "xs", outputs = ["b"]}}
  }
}

// -----

// Two removed barriers: the last phase waits on producers of both earlier
// phases (the first barrier's phases stay in the segment once it is gone).
// CHECK-LABEL: schedule.kernel @chain
// CHECK: schedule.counter @pa.done {size = 1 : i64}
// CHECK-NEXT: schedule.counter @pb.done {size = 1 : i64}
// CHECK-NOT: schedule.barrier
// CHECK: schedule.signal @pa.done {divisor = 2 : i64, task = "pa"}
// CHECK: schedule.signal @pb.done {divisor = 3 : i64, task = "pb"}
// CHECK: schedule.wait @pa.done {target = 2 : i64, task = "c"}
// CHECK-NEXT: schedule.wait @pb.done {target = 3 : i64, task = "c"}
schedule.kernel @chain attributes {threads = 256 : i64} {
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @b {dtype = "bf16", shape = array<i64: 64>}
  schedule.buffer @c {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "one" {
    schedule.opaque "pa" {count = 2 : i64, writes = [@a]}
  }
  schedule.barrier
  schedule.phase "two" {
    schedule.opaque "pb" {count = 3 : i64, writes = [@b]}
  }
  schedule.barrier
  schedule.phase "three" {
    schedule.opaque "c" {reads = [@a, @b], writes = [@c]}
  }
}

// -----

// A kept barrier ends the segment: the next barrier only weighs the phases
// after it, so the last reader of @a (ordered after its writer by the kept
// barrier) gets no counter and the second barrier goes.
// CHECK-LABEL: schedule.kernel @after_kept
// CHECK-NOT: schedule.counter
// CHECK: schedule.barrier
// CHECK-NEXT: schedule.phase "norm"
// CHECK-NOT: schedule.barrier
// CHECK: schedule.phase "late"
// CHECK-NOT: schedule.wait
schedule.kernel @after_kept attributes {threads = 256 : i64} {
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "write" {
    schedule.opaque "p" {count = 4 : i64, writes = [@a]}
  }
  schedule.barrier
  schedule.phase "norm" {
    schedule.opaque "norm" {partition = #schedule.partition<every_block>, reads = [@a], writes = [@xs], args = {base = "a", xs = "xs"}}
  }
  schedule.barrier
  schedule.phase "late" {
    schedule.opaque "late" {count = 2 : i64, reads = [@a], writes = [@y]}
  }
}

// -----

// A read before the barrier and a write after it (decode state updated in
// place): the writer waits for every reader instance.
// CHECK-LABEL: schedule.kernel @write_after_read
// CHECK: schedule.counter @kda.done {size = 1 : i64}
// CHECK: schedule.signal @kda.done {divisor = 4 : i64, task = "kda"}
// CHECK: schedule.wait @kda.done {target = 4 : i64, task = "commit"}
schedule.kernel @write_after_read attributes {threads = 256 : i64} {
  schedule.buffer @conv {dtype = "bf16", shape = array<i64: 3, 64>, space = "state"}
  schedule.buffer @o {dtype = "bf16", shape = array<i64: 64>}
  schedule.phase "attn" {
    schedule.opaque "kda" {count = 4 : i64, reads = [@conv], writes = [@o], grain = "head", grain_per = 2 : i64, args = {cq = "conv", o = "o"}}
  }
  schedule.barrier
  schedule.phase "commit" {
    schedule.opaque "commit" {reads = [@conv], writes = [@conv], args = {cq = "conv"}}
  }
}
