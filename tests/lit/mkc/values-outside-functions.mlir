// IR with an SSA value outside every func.func is refused before MLIR
// parses it, with the value's location: MLIR 19's parser writes into freed
// memory on this shape when the parse then fails (fixed after LLVM 19).
// The compiler's IR refers to weights and state by symbol at the top level.
// RUN: not mkc %s --emit=cuda -o %t 2>&1 | FileCheck %s --check-prefix=MKC --implicit-check-not=error
// RUN: not ls %t
// RUN: not mk-opt %s --allow-unregistered-dialect 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: cat %s | not mk-opt - --allow-unregistered-dialect 2>&1 | FileCheck %s --check-prefix=STDIN
// MKC: mkc: error: {{.*}}values-outside-functions.mlir:[[@LINE+4]]:1: an SSA value outside every func.func: this compiler's IR defines values only inside functions
// OPT: {{.*}}values-outside-functions.mlir:[[@LINE+3]]:1: error: an SSA value outside every func.func
// OPT-NOT: error
// STDIN: <stdin>:[[@LINE+1]]:1: error: an SSA value outside every func.func
%b = "t.use"(%n) : (i32) -> i32
func.func @f(%x: i32) -> i32 {
  %n = "t.def"(%x) : (i32) -> i32
  %q = "t.bad"(%x) : (i32) -> [
}
