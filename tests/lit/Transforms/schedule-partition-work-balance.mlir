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
// CHECK-NEXT: schedule.task "big" {{[a-z0-9_]+}} {{.*}}count = 8 : i64
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK: schedule.phase "b" {
// CHECK-NEXT: schedule.task "other.zero"
// CHECK-NEXT: schedule.task "slack" {{[a-z0-9_]+}} {{.*}}ksplit = 2 : i64, n = [256], outputs = [@acc], tiles = 2 : i64, tn = 128 : i64{{.*}}count = 4 : i64
// CHECK-NEXT: {{^ *}}}{{$}}
// OFF-LABEL: schedule.kernel @slack
// OFF: schedule.phase "a" {
// OFF-NEXT: schedule.task "big" {{[a-z0-9_]+}} {{.*}}count = 8 : i64
// OFF-NEXT: schedule.task "slack" {{[a-z0-9_]+}} {{.*}}ksplit = 4 : i64{{.*}}count = 8 : i64
// OFF-NEXT: {{^ *}}}{{$}}
// AGAIN: schedule.phase "a" {
// AGAIN-NEXT: schedule.task "big" {{[a-z0-9_]+}} {{.*}}count = 8 : i64
// AGAIN-NEXT: {{^ *}}}{{$}}
// AGAIN: schedule.phase "b" {
// AGAIN-NEXT: schedule.task "other.zero"
// AGAIN-NEXT: schedule.task "slack" {{[a-z0-9_]+}} {{.*}}ksplit = 2 : i64{{.*}}count = 4 : i64
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
    schedule.task "acc.zero" zero_f32 {writes = [@acc], args = {buffer = @acc, n = 256 : i64}}
  }
  schedule.barrier
  schedule.phase "a" {
    schedule.task "big" w4a16_gemv {reads = [@x], writes = [@y], args = {epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["wb"]}}
    schedule.task "slack" w4a16_gemv {reads = [@x], accumulates = [@acc], args = {epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 1024 : i64, n = [256], outputs = [@acc], weights = ["ws"]}}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.task "other.zero" zero_f32 {reads = [@y], writes = [@other], args = {buffer = @other, n = 256 : i64}}
  }
  schedule.barrier
  schedule.phase "c" {
    schedule.task "use" zero_f32 {reads = [@acc, @other], args = {buffer = @u, n = 1024 : i64}}
  }
}

// -----

// What stays: "slack" where phase "b" reads its sums (it must come first),
// "early" where phase "b" writes what it reads, "norm_user" because it reads
// an every-block value in shared memory (the norm's, computed in its own
// phase), and "late" because its phase has no later phase.
// CHECK-LABEL: schedule.kernel @stays
// CHECK: schedule.phase "a" {
// CHECK-NEXT: schedule.task "norm"
// CHECK-NEXT: schedule.task "big"
// CHECK-NEXT: schedule.task "slack"
// CHECK-NEXT: schedule.task "early"
// CHECK-NEXT: schedule.task "norm_user"
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK: schedule.phase "b" {
// CHECK-NEXT: schedule.task "reader"
// CHECK-NEXT: schedule.task "late"
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
    schedule.task "acc.zero" zero_f32 {args = {buffer = @acc, n = 256 : i64}}
    schedule.task "acc2.zero" zero_f32 {args = {buffer = @acc2, n = 256 : i64}}
  }
  schedule.barrier
  schedule.phase "a" {
    schedule.task "norm" residual_rmsnorm {partition = "every_block", reads = [@x], writes = [@res, @xs], args = {base = @x, dim = 1024 : i64, eps = 1.0e-06 : f64, out = @res, weight = "nw", xs = @xs}}
    schedule.task "big" w4a16_gemv {reads = [@x], writes = [@y], args = {epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["wb"]}}
    schedule.task "slack" w4a16_gemv {args = {epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 1024 : i64, n = [256], outputs = [@acc], weights = ["ws"]}}
    schedule.task "early" zero_f32 {reads = [@z], writes = [@e], args = {buffer = @e, n = 256 : i64}}
    schedule.task "norm_user" w4a16_gemv {args = {epilogue = "atomic_f32", group = 128 : i64, input = @xs, k = 1024 : i64, n = [256], outputs = [@acc2], weights = ["wn"]}}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.task "reader" zero_f32 {reads = [@acc], writes = [@z], args = {buffer = @z, n = 256 : i64}}
    schedule.task "late" zero_f32 {args = {buffer = @y2, n = 1024 : i64}}
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
// NOSPREAD-NEXT: schedule.task "big"
// NOSPREAD-COUNT-12: schedule.task "z{{[0-9]+}}"
// NOSPREAD-NEXT: {{^ *}}}{{$}}
// NOSPREAD: schedule.phase "b" {
// NOSPREAD-NEXT: schedule.task "one"
// NOSPREAD-NEXT: {{^ *}}}{{$}}
// CAP-LABEL: schedule.kernel @cap
// CAP: schedule.phase "a" {
// CAP-NEXT: schedule.task "big"
// CAP-NEXT: schedule.task "z0"
// CAP-NEXT: schedule.task "z1"
// CAP-NEXT: schedule.task "z2"
// CAP-NEXT: schedule.task "z3"
// CAP-NEXT: {{^ *}}}{{$}}
// CAP: schedule.phase "b" {
// CAP-NEXT: schedule.task "one"
// CAP-NEXT: schedule.task "z11"
// CAP-NEXT: schedule.task "z10"
// CAP-NEXT: schedule.task "z9"
// CAP-NEXT: schedule.task "z8"
// CAP-NEXT: schedule.task "z7"
// CAP-NEXT: schedule.task "z6"
// CAP-NEXT: schedule.task "z5"
// CAP-NEXT: schedule.task "z4"
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
    schedule.task "big" w4a16_gemv {reads = [@x], writes = [@y], args = {epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [1024], outputs = [@y], weights = ["wb"]}}
    schedule.task "z0" zero_f32 {writes = [@z0], args = {buffer = @z0, n = 64 : i64}}
    schedule.task "z1" zero_f32 {writes = [@z1], args = {buffer = @z1, n = 64 : i64}}
    schedule.task "z2" zero_f32 {writes = [@z2], args = {buffer = @z2, n = 64 : i64}}
    schedule.task "z3" zero_f32 {writes = [@z3], args = {buffer = @z3, n = 64 : i64}}
    schedule.task "z4" zero_f32 {writes = [@z4], args = {buffer = @z4, n = 64 : i64}}
    schedule.task "z5" zero_f32 {writes = [@z5], args = {buffer = @z5, n = 64 : i64}}
    schedule.task "z6" zero_f32 {writes = [@z6], args = {buffer = @z6, n = 64 : i64}}
    schedule.task "z7" zero_f32 {writes = [@z7], args = {buffer = @z7, n = 64 : i64}}
    schedule.task "z8" zero_f32 {writes = [@z8], args = {buffer = @z8, n = 64 : i64}}
    schedule.task "z9" zero_f32 {writes = [@z9], args = {buffer = @z9, n = 64 : i64}}
    schedule.task "z10" zero_f32 {writes = [@z10], args = {buffer = @z10, n = 64 : i64}}
    schedule.task "z11" zero_f32 {writes = [@z11], args = {buffer = @z11, n = 64 : i64}}
  }
  schedule.barrier
  schedule.phase "b" {
    schedule.task "one" zero_f32 {reads = [@y], writes = [@o], args = {buffer = @o, n = 64 : i64}}
  }
  schedule.barrier
  schedule.phase "c" {
    schedule.task "use" zero_f32 {reads = [@o, @z0, @z1, @z2, @z3, @z4, @z5, @z6, @z7, @z8, @z9, @z10, @z11], writes = [@u], args = {buffer = @u, n = 64 : i64}}
  }
}
