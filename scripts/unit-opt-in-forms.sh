# Sourced by make-gpu-kernels.sh (which carries their CUBINs) and
# gpu-suite.sh (whose `main` wave runs the one-step oracle test on each):
# the unit kernel's opt-in template forms that the suite tests, as NVRTC
# options, one form each (docs/runtime.md lists every opt-in macro).
MK_UNIT_OPT_IN_FORMS="-DMK_MLA_WARP_SOFTMAX -DMK_MLA_BULK_ROWS -DMK_TOPK_TWO_LEVEL_ALL -DMK_GEMV_SHARED_LOADS"
