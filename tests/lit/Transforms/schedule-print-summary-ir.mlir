// RUN: mk-opt %s -split-input-file --schedule-print-summary -o /dev/null 2>&1 | FileCheck %s --strict-whitespace
// RUN: rm -f %t.summary
// RUN: mk-opt %s -o %t.plain.mlir
// RUN: mk-opt %s "--schedule-print-summary=o=%t.summary" -o %t.after.mlir
// RUN: FileCheck %s --strict-whitespace --input-file=%t.summary
// RUN: diff %t.plain.mlir %t.after.mlir
// RUN: not mk-opt %s "--schedule-print-summary=o=" 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not mk-opt %s "--schedule-print-summary=o=%t.nodir/summary.txt" 2>&1 | FileCheck %s --check-prefix=NOFILE

// schedule-print-summary on hand-written kernels. Per kernel: a header
// (phases, grid barriers, counter words and arrays, threads, target SMs,
// workspace bytes: -1 until planned), one line per phase (instances of its
// tasks, every_block ones included, and MB streamed), per task its kind,
// count, MB and name [partition], then the phase's waits and signals
// (waits first, whatever the order in the IR), the barriers where they
// stand, and a total (task ops, waits, MB). It goes to stderr, or to the
// file `o` names (the whole module in one summary), and leaves the IR as
// it was. A module without a kernel prints nothing.
//
// EMPTY: error: schedule-print-summary: o must be a file or '-', got ''
// NOFILE: error: cannot write {{.*}}.nodir/summary.txt: No such file or directory

// CHECK-LABEL: {{^}}schedule @mk_sum: 4 phases, 1 grid barriers, 5 counters (2 arrays), threads 128, target 4 SMs, workspace 4096 B{{$}}
// CHECK-NEXT: {{^}}  phase  0       2 tasks       0.001 MB  zero{{$}}
// CHECK-NEXT: {{^}}      zero_f32               x2           0.001 MB  acc.zero [slices]{{$}}
// CHECK-NEXT: {{^}}  ---- grid barrier ----{{$}}
// CHECK-NEXT: {{^}}  phase  1       9 tasks       1.504 MB  norm{{$}}
// CHECK-NEXT: {{^}}      residual_rmsnorm       x1           0.004 MB  norm [every_block]{{$}}
// CHECK-NEXT: {{^}}      w4a16_gemv             x8           1.500 MB  proj [cols]{{$}}
// CHECK-NEXT: {{^}}      signal @y.ready by proj{{$}}
// CHECK-NEXT: {{^}}  phase  2       4 tasks       0.002 MB  down{{$}}
// CHECK-NEXT: {{^}}      w4a16_gemv             x4           0.002 MB  down [split_k]{{$}}
// CHECK-NEXT: {{^}}      wait   @y.ready >= 2 by down{{$}}
// CHECK-NEXT: {{^}}      signal @acc.done by down{{$}}
// CHECK-NEXT: {{^}}  phase  3       1 tasks       0.000 MB  final{{$}}
// CHECK-NEXT: {{^}}      final_residual         x1           0.000 MB  final{{$}}
// CHECK-NEXT: {{^}}      wait   @acc.done >= 4 by final{{$}}
// CHECK-NEXT: {{^}}  total: 5 tasks, 2 waits, 1.507 MB streamed{{$}}
schedule.kernel @mk_sum attributes {threads = 128 : i64, target_sms = 4 : i64, workspace_bytes = 4096 : i64} {
  schedule.weight @nw {dtype = "bf16", shape = array<i64: 64>}
  schedule.weight @pw.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.weight @dw.w_q {dtype = "u8", shape = array<i64: 32, 64>, group = 32 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 64>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 64>, offset = 0 : i64}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 64>, offset = 256 : i64}
  schedule.buffer @out {dtype = "bf16", shape = array<i64: 64>, space = "io"}
  schedule.counter @y.ready {size = 4 : i64, base = 0 : i64}
  schedule.counter @acc.done {size = 1 : i64, base = 4 : i64}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {partition = #schedule.partition<slices>, count = 2 : i64, bytes = 512 : i64, writes = [@acc],
                            buffer = @acc, n = 64 : i64}
  }
  schedule.barrier
  schedule.phase "norm" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, count = 1 : i64, bytes = 4096 : i64, reads = [@x], writes = [@xs],
                        base = @x, weight = "nw", dim = 64 : i64, eps = 1.0e-06 : f64, xs = @xs}
    schedule.w4a16_gemv "proj" {partition = #schedule.partition<cols>, count = 8 : i64, bytes = 1500000 : i64, reads = [@xs], writes = [@y],
                        weights = ["pw"], outputs = [@y], n = [64], k = 64 : i64, group = 32 : i64, input = @xs}
    schedule.signal @y.ready {task = "proj", divisor = 2 : i64}
  }
  schedule.phase "down" {
    schedule.w4a16_gemv "down" {partition = #schedule.partition<split_k>, count = 4 : i64, bytes = 2048 : i64, reads = [@y], accumulates = [@acc],
                        weights = ["dw"], outputs = [@acc], n = [64], k = 64 : i64, group = 32 : i64, input = @y, epilogue = "atomic_f32"}
    schedule.signal @acc.done {task = "down", divisor = 4 : i64}
    schedule.wait @y.ready {task = "down", target = 2 : i64}
  }
  schedule.phase "final" {
    schedule.final_residual "final" {count = 1 : i64, reads = [@x, @acc], writes = [@out],
                         base = @x, acc = @acc, out = @out, dim = 64 : i64}
    schedule.wait @acc.done {task = "final", target = 4 : i64}
  }
}

// -----

// No phases: zero counts, and the defaults of an unpartitioned, unplanned
// kernel (target 132 SMs, workspace -1).
// CHECK-LABEL: {{^}}schedule @empty: 0 phases, 0 grid barriers, 0 counters (0 arrays), threads 256, target 132 SMs, workspace -1 B{{$}}
// CHECK-NEXT: {{^}}  total: 0 tasks, 0 waits, 0.000 MB streamed{{$}}
schedule.kernel @empty attributes {threads = 256 : i64} {
}

// -----

// Two kernels: one table each, phase numbers and totals start over.
// CHECK-LABEL: {{^}}schedule @first: 2 phases, 1 grid barriers, 0 counters (0 arrays), threads 64, target 132 SMs, workspace 0 B{{$}}
// CHECK-NEXT: {{^}}  phase  0      12 tasks       3.000 MB  a{{$}}
// CHECK-NEXT: {{^}}      bf16_rows              x12          3.000 MB  rows{{$}}
// CHECK-NEXT: {{^}}  ---- grid barrier ----{{$}}
// CHECK-NEXT: {{^}}  phase  1       1 tasks       0.000 MB  b{{$}}
// CHECK-NEXT: {{^}}      opaque                 x1           0.000 MB  use{{$}}
// CHECK-NEXT: {{^}}  total: 2 tasks, 0 waits, 3.000 MB streamed{{$}}
// CHECK-NEXT: {{^}}schedule @second: 1 phases, 0 grid barriers, 0 counters (0 arrays), threads 32, target 132 SMs, workspace -1 B{{$}}
// CHECK-NEXT: {{^}}  phase  0  123456 tasks    1000.000 MB  c{{$}}
// CHECK-NEXT: {{^}}      opaque                 x123456   1000.000 MB  many [experts]{{$}}
// CHECK-NEXT: {{^}}  total: 1 tasks, 0 waits, 1000.000 MB streamed{{$}}
// CHECK-NOT: schedule @
schedule.kernel @first attributes {threads = 64 : i64, workspace_bytes = 0 : i64} {
  schedule.weight @rw {dtype = "bf16", shape = array<i64: 12, 64>}
  schedule.buffer @r {dtype = "bf16", shape = array<i64: 12>, offset = 0 : i64}
  schedule.phase "a" {
    schedule.bf16_rows "rows" {count = 12 : i64, bytes = 3000000 : i64, writes = [@r],
                        weight = "rw", output = @r, k = 64 : i64, rows = 12 : i64}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.opaque "use" {count = 1 : i64, reads = [@r]}
  }
}
schedule.kernel @second attributes {threads = 32 : i64} {
  schedule.phase "c" {
    schedule.opaque "many" {partition = #schedule.partition<experts>, count = 123456 : i64, bytes = 1000000000 : i64}
  }
}

// -----

// A graph module has no kernel: nothing is printed for it.
graph.weight @w : tensor<4xbf16>
