// RUN: mk-opt %s "--schedule-tile-weights=arithmetic=int8" | FileCheck %s
// RUN: mk-opt %s --schedule-tile-weights | FileCheck %s --check-prefixes=EXACT,FOLDED
// RUN: mk-opt %s "--schedule-tile-weights=arithmetic=exact" | FileCheck %s --check-prefixes=EXACT,SPEC
// RUN: mk-opt %s "--schedule-tile-weights=arithmetic=scaled" | FileCheck %s --check-prefixes=EXACT,SCALED
// RUN: mk-opt %s "--schedule-tile-weights=layout=tiled" | FileCheck %s --check-prefix=TILED
// RUN: mk-opt %s "--schedule-tile-weights=layout=row-major" | FileCheck %s --check-prefix=ROWMAJOR
// RUN: not mk-opt %s "--schedule-tile-weights=arithmetic=fp8" 2>&1 | FileCheck %s --check-prefix=BADARITH

// Which weights the default layout (packed) moves: only those every task
// reads as whole steps of a 128- or 64-wide tile of the chosen arithmetic,
// and that no other task reads. The integer tile (arithmetic=int8) steps
// 32 rows at either width, reads k-slices of at most 3584 rows and groups
// of at most 128 rows (multiples of 32); the tensor-core tile (`mma`,
// arithmetic=folded, the default, =scaled and =exact) steps 1 KB (16 rows at 128
// wide, 32 at 64 wide). A moved weight's parts get its tile width (`tile`),
// its w_q the order of the tile that streams it (`order`); the others keep
// the spec's storage (neither attribute). The kernel records the `mma`
// tiles' math (`packed_arithmetic`, printed where not the default "exact").
// SCALED: schedule.kernel @k attributes {packed_arithmetic = "scaled", threads = 256 : i64}
// SPEC: schedule.kernel @k attributes {threads = 256 : i64}
// FOLDED: schedule.kernel @k attributes {packed_arithmetic = "folded", threads = 256 : i64}
// CHECK: schedule.weight @w128.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "int8", shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// CHECK-NEXT: schedule.weight @w64.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "int8", shape = array<i64: {{[0-9, ]+}}>, tile = 64 : i64}{{$}}
// CHECK-NEXT: schedule.weight @w64s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// CHECK-NEXT: schedule.weight @w128s8.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// CHECK-NEXT: schedule.weight @w128s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// CHECK-NEXT: schedule.weight @w128g256.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// CHECK-NEXT: schedule.weight @w128long.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// CHECK-NEXT: schedule.weight @w32.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// CHECK-NEXT: schedule.weight @shared.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// EXACT: schedule.weight @w128.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "mma", shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// EXACT-NEXT: schedule.weight @w64.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "mma", shape = array<i64: {{[0-9, ]+}}>, tile = 64 : i64}{{$}}
// EXACT-NEXT: schedule.weight @w64s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// EXACT-NEXT: schedule.weight @w128s8.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// EXACT-NEXT: schedule.weight @w128s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "mma", shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// EXACT-NEXT: schedule.weight @w128g256.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "mma", shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// EXACT-NEXT: schedule.weight @w128long.w_q {dtype = "u8", group = {{[0-9]+}} : i64, order = "mma", shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// EXACT-NEXT: schedule.weight @w32.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// EXACT-NEXT: schedule.weight @shared.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// TILED: schedule.weight @w128.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// TILED-NEXT: schedule.weight @w64.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 64 : i64}{{$}}
// TILED-NEXT: schedule.weight @w64s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 64 : i64}{{$}}
// TILED-NEXT: schedule.weight @w128s8.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// TILED-NEXT: schedule.weight @w128s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// TILED-NEXT: schedule.weight @w128g256.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// TILED-NEXT: schedule.weight @w128long.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 128 : i64}{{$}}
// TILED-NEXT: schedule.weight @w32.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>, tile = 32 : i64}{{$}}
// TILED-NEXT: schedule.weight @shared.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR: schedule.weight @w128.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w64.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w64s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w128s8.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w128s16.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w128g256.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w128long.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @w32.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// ROWMAJOR-NEXT: schedule.weight @shared.w_q {dtype = "u8", group = {{[0-9]+}} : i64, shape = array<i64: {{[0-9, ]+}}>}{{$}}
// BADARITH: schedule-tile-weights: arithmetic must be folded, scaled, exact or int8, got 'fp8'
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 4096>, space = "io"}
  schedule.buffer @ya {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @yb {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @yc {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @yd {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @yh {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @yi {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @yj {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @ye {dtype = "bf16", shape = array<i64: 128>}
  schedule.buffer @yf {dtype = "bf16", shape = array<i64: 128>}
  schedule.weight @w128.w_q {dtype = "u8", shape = array<i64: 1152, 256>, group = 128 : i64}
  schedule.weight @w64.w_q {dtype = "u8", shape = array<i64: 1152, 256>, group = 128 : i64}
  schedule.weight @w64s16.w_q {dtype = "u8", shape = array<i64: 48, 128>, group = 32 : i64}
  schedule.weight @w128s8.w_q {dtype = "u8", shape = array<i64: 32, 128>, group = 32 : i64}
  schedule.weight @w128s16.w_q {dtype = "u8", shape = array<i64: 32, 128>, group = 32 : i64}
  schedule.weight @w128g256.w_q {dtype = "u8", shape = array<i64: 512, 128>, group = 256 : i64}
  schedule.weight @w128long.w_q {dtype = "u8", shape = array<i64: 2048, 128>, group = 128 : i64}
  schedule.weight @w32.w_q {dtype = "u8", shape = array<i64: 128, 128>, group = 128 : i64}
  schedule.weight @shared.w_q {dtype = "u8", shape = array<i64: 128, 128>, group = 128 : i64}
  schedule.phase "p" {
    // 128 wide, k-slices of 2304 / 2 = 1152 rows: packed.
    schedule.w4a16_gemv "a" {count = 4 : i64, reads = [@x], writes = [@ya], input = @x, outputs = [@ya], group = 128 : i64, k = 2304 : i64, ksplit = 2 : i64, n = [256], tn = 128 : i64, weights = ["w128"]}
    // 64 wide, full K of 2304 rows: packed.
    schedule.w4a16_gemv "b" {count = 4 : i64, reads = [@x], writes = [@yb], input = @x, outputs = [@yb], group = 128 : i64, k = 2304 : i64, ksplit = 1 : i64, n = [256], tn = 64 : i64, weights = ["w64"]}
    // 64 wide, k-slices of 48 rows (not whole 32-row steps): spec storage.
    schedule.w4a16_gemv "c" {count = 4 : i64, reads = [@x], writes = [@yc], input = @x, outputs = [@yc], group = 32 : i64, k = 96 : i64, ksplit = 2 : i64, n = [128], tn = 64 : i64, weights = ["w64s16"]}
    // 128 wide, k-slices of 8 rows (not whole 16-row steps): spec storage.
    schedule.w4a16_gemv "d" {count = 4 : i64, reads = [@x], writes = [@yd], input = @x, outputs = [@yd], group = 32 : i64, k = 64 : i64, ksplit = 8 : i64, n = [128], tn = 128 : i64, weights = ["w128s8"]}
    // 128 wide, k-slices of 16 rows: exact steps, not integer ones.
    schedule.w4a16_gemv "h" {count = 4 : i64, reads = [@x], writes = [@yh], input = @x, outputs = [@yh], group = 32 : i64, k = 64 : i64, ksplit = 4 : i64, n = [128], tn = 128 : i64, weights = ["w128s16"]}
    // Groups of 256 rows: too long for the integer tile's sums.
    schedule.w4a16_gemv "i" {count = 4 : i64, reads = [@x], writes = [@yi], input = @x, outputs = [@yi], group = 256 : i64, k = 1024 : i64, ksplit = 1 : i64, n = [128], tn = 128 : i64, weights = ["w128g256"]}
    // A k-slice of 4096 rows: more than the integer tile's quantized x holds.
    schedule.w4a16_gemv "j" {count = 4 : i64, reads = [@x], writes = [@yj], input = @x, outputs = [@yj], group = 128 : i64, k = 4096 : i64, ksplit = 1 : i64, n = [128], tn = 128 : i64, weights = ["w128long"]}
    // 32 wide: no packed tile of that width.
    schedule.w4a16_gemv "e" {count = 4 : i64, reads = [@x], writes = [@ye], input = @x, outputs = [@ye], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, n = [128], tn = 32 : i64, weights = ["w32"]}
    // Also read by another kind of task: never moved.
    schedule.w4a16_gemv "f" {count = 4 : i64, reads = [@x], writes = [@yf], input = @x, outputs = [@yf], group = 128 : i64, k = 256 : i64, ksplit = 1 : i64, n = [128], tn = 128 : i64, weights = ["shared"]}
    schedule.opaque "g" {count = 1 : i64, args = {kv_b = "shared"}}
  }
}
