// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=8 phase-budget=false" | FileCheck %s
// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=8 balance-phases=false phase-budget=false" | FileCheck %s --check-prefix=OFF
// The pass run again on its own output gives the same cuts and places.
// RUN: mk-opt %s "--schedule-partition-work=target-sms=8 phase-budget=false" | mk-opt "--schedule-partition-work=target-sms=8 phase-budget=false" | FileCheck %s --check-prefix=AGAIN
// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=32 balance-spread=true phase-budget=false" | FileCheck %s --check-prefix=CAP
// RUN: mk-opt %s -split-input-file "--schedule-partition-work=target-sms=32 phase-budget=false" | FileCheck %s --check-prefix=NOSPREAD

// schedule-partition-work's phase balancing (balance-phases, on by default)
// on hand-written phases, 8 blocks. Phase "a" holds the 8 tiles of "big"
// and "slack", whose sums nothing reads before phase "c"; phase "b" has one
// instance, so 7 blocks idle. Unbalanced, every block of "a" runs a tile of
// "big" and one of "slack" (split-K 4). Balanced, "slack" goes last into
// "b", cut again for its 7 idle blocks (split-K 2: 4 instances).
// CHECK-LABEL: schedule.kernel @slack
// CHECK: schedule.phase "a" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "big" {{{.*}}count = 8 : i64
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK: schedule.phase "b" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "other.zero"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "slack" {{{.*}}count = 4 : i64{{.*}}ksplit = 2 : i64{{.*}}n = [256]{{.*}}outputs = [@acc]{{.*}}tiles = 2 : i64{{.*}}tn = 128 : i64
// CHECK-NEXT: {{^ *}}}{{$}}
// OFF-LABEL: schedule.kernel @slack
// OFF: schedule.phase "a" {
// OFF-NEXT: schedule.{{[a-z0-9_]+}} "big" {{{.*}}count = 8 : i64
// OFF-NEXT: schedule.{{[a-z0-9_]+}} "slack" {{{.*}}count = 8 : i64{{.*}}ksplit = 4 : i64
// OFF-NEXT: {{^ *}}}{{$}}
// AGAIN: schedule.phase "a" {
// AGAIN-NEXT: schedule.{{[a-z0-9_]+}} "big" {{{.*}}count = 8 : i64
// AGAIN-NEXT: {{^ *}}}{{$}}
// AGAIN: schedule.phase "b" {
// AGAIN-NEXT: schedule.{{[a-z0-9_]+}} "other.zero"
// AGAIN-NEXT: schedule.{{[a-z0-9_]+}} "slack" {{{.*}}count = 4 : i64{{.*}}ksplit = 2 : i64
// AGAIN-NEXT: {{^ *}}}{{$}}
schedule.kernel @slack attributes {threads = 256 : i64} {
  schedule.weight @wb.w_q {dtype = "u8", shape = array<i64: 512, 1024>, group = 128 : i64}
  schedule.weight @ws.w_q {dtype = "u8", shape = array<i64: 512, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 1024>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 1024>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @other {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @u {dtype = "f32", shape = array<i64: 1024>}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {writes = [@acc], buffer = @acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "a" {
    schedule.w4a16_gemv "big" {reads = [@x], writes = [@y], epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["wb"]}
    schedule.w4a16_gemv "slack" {reads = [@x], accumulates = [@acc], epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 1024 : i64, n = [256], outputs = [@acc], weights = ["ws"]}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.zero_f32 "other.zero" {reads = [@y], writes = [@other], buffer = @other, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "c" {
    schedule.zero_f32 "use" {reads = [@acc, @other], buffer = @u, n = 1024 : i64}
  }
}

// -----

// What stays: "slack" where phase "b" reads its sums (it must come first),
// "early" where phase "b" writes what it reads, "norm_user" because it reads
// an every-block value in shared memory (the norm's, computed in its own
// phase), and "late" because its phase has no later phase.
// CHECK-LABEL: schedule.kernel @stays
// CHECK: schedule.phase "a" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "norm"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "big"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "slack"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "early"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "norm_user"
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK: schedule.phase "b" {
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "reader"
// CHECK-NEXT: schedule.{{[a-z0-9_]+}} "late"
// CHECK-NEXT: {{^ *}}}{{$}}
schedule.kernel @stays attributes {threads = 256 : i64} {
  schedule.weight @wb.w_q {dtype = "u8", shape = array<i64: 512, 1024>, group = 128 : i64}
  schedule.weight @ws.w_q {dtype = "u8", shape = array<i64: 512, 256>, group = 128 : i64}
  schedule.weight @wn.w_q {dtype = "u8", shape = array<i64: 512, 256>, group = 128 : i64}
  schedule.weight @nw {dtype = "bf16", shape = array<i64: 1024>}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 1024>, space = "io"}
  schedule.buffer @res {dtype = "bf16", shape = array<i64: 1024>}
  schedule.buffer @xs {dtype = "f32", shape = array<i64: 1024>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 1024>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @acc2 {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @e {dtype = "f32", shape = array<i64: 256>}
  schedule.buffer @z {dtype = "f32", shape = array<i64: 256>, space = "io"}
  schedule.buffer @y2 {dtype = "f32", shape = array<i64: 1024>}
  schedule.phase "zero" {
    schedule.zero_f32 "acc.zero" {buffer = @acc, n = 256 : i64}
    schedule.zero_f32 "acc2.zero" {buffer = @acc2, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "a" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, reads = [@x], writes = [@res, @xs], base = @x, dim = 1024 : i64, eps = 1.0e-06 : f64, out = @res, weight = "nw", xs = @xs}
    schedule.w4a16_gemv "big" {reads = [@x], writes = [@y], epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["wb"]}
    schedule.w4a16_gemv "slack" {epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 1024 : i64, n = [256], outputs = [@acc], weights = ["ws"]}
    schedule.zero_f32 "early" {reads = [@z], writes = [@e], buffer = @e, n = 256 : i64}
    schedule.w4a16_gemv "norm_user" {epilogue = "atomic_f32", group = 128 : i64, input = @xs, k = 1024 : i64, n = [256], outputs = [@acc2], weights = ["wn"]}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.zero_f32 "reader" {reads = [@acc], writes = [@z], buffer = @z, n = 256 : i64}
    schedule.zero_f32 "late" {buffer = @y2, n = 1024 : i64}
  }
}

// -----

// A phase takes at most 8 tasks from moves (each is one more branch of its
// task loop; many of them make ptxas spill the kernel body). On 32 blocks,
// the 12 zeroing tasks beside the 32 tiles of "big" would all spread into
// phase "b"'s 31 idle blocks with balance-spread=true; the last 8 go, z0..z3
// stay. Their moves only spread the load (each block of "a" keeps a tile of
// "big"): by default (balance-spread=false) none of them moves.
// NOSPREAD-LABEL: schedule.kernel @cap
// NOSPREAD: schedule.phase "a" {
// NOSPREAD-NEXT: schedule.{{[a-z0-9_]+}} "big"
// NOSPREAD-COUNT-12: schedule.{{[a-z0-9_]+}} "z{{[0-9]+}}"
// NOSPREAD-NEXT: {{^ *}}}{{$}}
// NOSPREAD: schedule.phase "b" {
// NOSPREAD-NEXT: schedule.{{[a-z0-9_]+}} "one"
// NOSPREAD-NEXT: {{^ *}}}{{$}}
// CAP-LABEL: schedule.kernel @cap
// CAP: schedule.phase "a" {
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "big"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z0"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z1"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z2"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z3"
// CAP-NEXT: {{^ *}}}{{$}}
// CAP: schedule.phase "b" {
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "one"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z11"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z10"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z9"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z8"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z7"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z6"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z5"
// CAP-NEXT: schedule.{{[a-z0-9_]+}} "z4"
// CAP-NEXT: {{^ *}}}{{$}}
schedule.kernel @cap attributes {threads = 256 : i64} {
  schedule.weight @wb.w_q {dtype = "u8", shape = array<i64: 512, 1024>, group = 128 : i64}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 1024>, space = "io"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 1024>}
  schedule.buffer @o {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @u {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z0 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z1 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z2 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z3 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z4 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z5 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z6 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z7 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z8 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z9 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z10 {dtype = "f32", shape = array<i64: 64>}
  schedule.buffer @z11 {dtype = "f32", shape = array<i64: 64>}
  schedule.phase "a" {
    schedule.w4a16_gemv "big" {reads = [@x], writes = [@y], epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["wb"]}
    schedule.zero_f32 "z0" {writes = [@z0], buffer = @z0, n = 64 : i64}
    schedule.zero_f32 "z1" {writes = [@z1], buffer = @z1, n = 64 : i64}
    schedule.zero_f32 "z2" {writes = [@z2], buffer = @z2, n = 64 : i64}
    schedule.zero_f32 "z3" {writes = [@z3], buffer = @z3, n = 64 : i64}
    schedule.zero_f32 "z4" {writes = [@z4], buffer = @z4, n = 64 : i64}
    schedule.zero_f32 "z5" {writes = [@z5], buffer = @z5, n = 64 : i64}
    schedule.zero_f32 "z6" {writes = [@z6], buffer = @z6, n = 64 : i64}
    schedule.zero_f32 "z7" {writes = [@z7], buffer = @z7, n = 64 : i64}
    schedule.zero_f32 "z8" {writes = [@z8], buffer = @z8, n = 64 : i64}
    schedule.zero_f32 "z9" {writes = [@z9], buffer = @z9, n = 64 : i64}
    schedule.zero_f32 "z10" {writes = [@z10], buffer = @z10, n = 64 : i64}
    schedule.zero_f32 "z11" {writes = [@z11], buffer = @z11, n = 64 : i64}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.zero_f32 "one" {reads = [@y], writes = [@o], buffer = @o, n = 64 : i64}
  }
  schedule.barrier
  schedule.phase "c" {
    schedule.zero_f32 "use" {reads = [@o, @z0, @z1, @z2, @z3, @z4, @z5, @z6, @z7, @z8, @z9, @z10, @z11], writes = [@u], buffer = @u, n = 64 : i64}
  }
}
