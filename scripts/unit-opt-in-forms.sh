# Sourced by make-gpu-kernels.sh (which carries their CUBINs) and
# gpu-suite.sh (whose `main` wave runs the one-step oracle test on each):
# the unit kernel's opt-in template forms that the suite tests, as NVRTC
# options, one form each (docs/runtime.md lists every opt-in macro). An
# entry OPTION@VARIANT applies the option to the schedule variant's kernel
# (a directory beside the unit's, e.g. kimi_linear_w4a16_thg8) instead of
# the unit's: -DMK_MLA_WARP_SOFTMAX applies only to 8-head attention tasks,
# which the default's 16-head ones are not.
MK_UNIT_OPT_IN_FORMS="-DMK_MLA_WARP_SOFTMAX@kimi_linear_w4a16_thg8 -DMK_MLA_BULK_ROWS -DMK_TOPK_TWO_LEVEL_ALL -DMK_GEMV_SHARED_LOADS -DMK_MLA_SOFTMAX_ADJACENT -DMK_MLA_QUERY_REGS -DMK_MLA_SCORE_ALL_ROWS"
# unit_opt_in_form ENTRY: sets opt_in_option and opt_in_kernel (the kernel
# directory's name) from an entry of the list.
unit_opt_in_form() {
  opt_in_option=${1%%@*}
  opt_in_kernel=kimi_linear_w4a16
  case "$1" in *@*) opt_in_kernel=${1#*@} ;; esac
}
