// RUN: mk-opt %s -split-input-file -verify-diagnostics --schedule-barriers-to-counters | FileCheck %s

// The barrier pass checks the grains it links (grain_per dividing the
// count; the task op holds it positive, no more units waited for than made; these once
// divided by zero or made counters the verifier refused) and never reuses a
// symbol the kernel already has.

// A producer whose grain_per does not divide its count.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p0" {
    // expected-error @+1 {{grain_per 2 must be positive and divide the count 5}}
    schedule.opaque "p" {count = 5 : i64, writes = [@a], grain = "u", grain_per = 2 : i64}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.opaque "c" {count = 4 : i64, reads = [@a], grain = "u", grain_per = 1 : i64}
  }
}

// -----

// grain_per 0 on the consumer: the task op refuses it when read.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p0" {
    schedule.opaque "p" {count = 4 : i64, writes = [@a], grain = "u", grain_per = 1 : i64}
  }
  schedule.barrier
  schedule.phase "p1" {
    // expected-error @+1 {{op attribute 'grain_per' failed to satisfy constraint: an integer in 1..2147483647}}
    schedule.opaque "c" {count = 4 : i64, reads = [@a], grain = "u", grain_per = 0 : i64}
  }
}

// -----

// The consumer waits for more units than the producer makes.
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p0" {
    schedule.opaque "p" {count = 4 : i64, writes = [@a], grain = "u", grain_per = 2 : i64}
  }
  schedule.barrier
  schedule.phase "p1" {
    // expected-error @+1 {{waits for 3 units of grain 'u' but 'p' makes 2}}
    schedule.opaque "c" {count = 6 : i64, reads = [@a], grain = "u", grain_per = 2 : i64}
  }
}

// -----

// The kernel already has a symbol named p.done: the new counter gets a
// fresh name and its own signal.
// CHECK-LABEL: schedule.kernel @k
// CHECK: schedule.counter @p.done {size = 3 : i64}
// CHECK: schedule.counter @p.done.1 {size = 1 : i64}
// CHECK: schedule.signal @p.done.1 {divisor = 4 : i64, task = "p"}
// CHECK: schedule.wait @p.done.1 {divisor = 4 : i64, target = 4 : i64, task = "c"}
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @a {dtype = "bf16", shape = array<i64: 256>}
  schedule.counter @p.done {size = 3 : i64}
  schedule.phase "p0" {
    schedule.opaque "p" {count = 4 : i64, writes = [@a]}
  }
  schedule.barrier
  schedule.phase "p1" {
    schedule.opaque "c" {count = 4 : i64, reads = [@a]}
  }
}
