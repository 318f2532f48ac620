// RUN: mk-opt %s -split-input-file -verify-diagnostics --schedule-partition-work

// Hand-written schedule IR whose task arguments are missing, zero or out of
// range: each is a located error, never a crash (these once divided by zero
// or indexed past an empty list of cuts).

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{argument 'group' must be in 1..2147483647, got 0}}
    schedule.task "g" {kind = "w4a16_gemv", reads = [@x], writes = [@y], args = {k = 256 : i64, n = [256], input = "x", outputs = ["y"]}}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{argument 'rows' must be in 1..2147483647, got -3}}
    schedule.task "r" {kind = "bf16_rows", reads = [@x], writes = [@y], args = {rows = -3 : i64, k = 256 : i64}}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{argument 'nope' must be in 1..2147483647, got 0}}
    schedule.task "a" {kind = "mla_q_absorb", args = {lora = 512 : i64, heads = 2 : i64, v_head = 128 : i64}}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.phase "p" {
    // expected-error @+1 {{argument 'heads' must be in 1..2147483647, got 0}}
    schedule.task "a" {kind = "mla_attention_chunk", args = {lora = 512 : i64}}
  }
}

// -----

schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.buffer @x {dtype = "f32", shape = array<i64: 256>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.phase "p" {
    // expected-error @+1 {{argument 'n' must be in 1..2147483647, got -256}}
    schedule.task "g" {kind = "w4a16_gemv", reads = [@x], writes = [@y], args = {k = 256 : i64, group = 32 : i64, n = [-256]}}
  }
}
