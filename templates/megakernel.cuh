//===- megakernel.cuh - Everything an emitted kernel includes -----*- CUDA -*-===//
#pragma once

#include "mk/common.cuh"
#include "mk/grid_sync.cuh"
#include "mk/rmsnorm.cuh"
#include "mk/w4a16_gemv.cuh"
#include "mk/bf16_gemv.cuh"
#include "mk/elementwise.cuh"
#include "mk/phase_timing.cuh"
#include "mk/kda.cuh"
#include "mk/mla.cuh"
#include "mk/moe.cuh"
#include "mk/gqa.cuh"
