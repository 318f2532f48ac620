# Runs mk-oracle on good and bad input; checks exit codes and messages.
file(MAKE_DIRECTORY ${WORKDIR})
set(TINY ${MK_SOURCE_DIR}/examples/specs/tiny.json)

function(expect_run code pattern)
  execute_process(COMMAND ${MK_ORACLE} ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL code)
    message(FATAL_ERROR "mk-oracle ${ARGN}: exit ${rc}, expected ${code}\n${out}${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "mk-oracle ${ARGN}: output lacks '${pattern}':\n${out}${err}")
  endif()
endfunction()

expect_run(0 "step 1 ctx 4: sum" run ${TINY} --ctx 3 --steps 2)
expect_run(0 "wrote 147 tensors" write-weights ${TINY} ${WORKDIR}/w.safetensors --seed 3)
expect_run(0 "wrote state" write-inputs ${TINY} ${WORKDIR}/i.safetensors --ctx 5)
expect_run(0 "step 0 ctx 5: sum" run ${TINY} --weights ${WORKDIR}/w.safetensors
           --inputs ${WORKDIR}/i.safetensors --dump ${WORKDIR}/o.safetensors)
expect_run(0 "layer3.mla_o" run ${TINY} --trace)
expect_run(2 "unknown command 'frobnicate'" frobnicate)
expect_run(2 "unknown option '--bogus'" run ${TINY} --bogus 1)
expect_run(2 "needs an integer >= 1, got '0'" run ${TINY} --steps 0)
expect_run(2 "needs an integer >= 0, got 'x'" run ${TINY} --ctx x)
expect_run(2 "either --weights or --seed" run ${TINY} --seed 1 --weights ${WORKDIR}/w.safetensors)
expect_run(2 "option '--seed' needs a value" write-weights ${TINY} ${WORKDIR}/w2.safetensors --seed)
expect_run(1 "cannot open: No such file" run ${WORKDIR}/nope.json)
expect_run(1 "does not hold the weights of spec 'kimi_linear_w4a16'"
           run ${MK_SOURCE_DIR}/examples/kimi_linear_w4a16.json --weights ${WORKDIR}/w.safetensors)
expect_run(1 "cannot open for writing" write-weights ${TINY} /nonexistent/dir/w.safetensors)
# convert-hf: a spec's weights from a Hugging Face checkpoint
# (the conversion itself: HfCheckpointTest.cpp).
set(DENSE ${MK_SOURCE_DIR}/examples/specs/tiny_dense_gqa.json)
expect_run(2 "convert-hf needs SPEC.json, CHECKPOINT_DIR and OUT.safetensors" convert-hf ${DENSE})
expect_run(1 "not a directory" convert-hf ${DENSE} ${WORKDIR}/no-checkpoint ${WORKDIR}/c.safetensors)
expect_run(1 "its KDA layers are the unit's form" convert-hf ${TINY} ${WORKDIR} ${WORKDIR}/c.safetensors)
expect_run(1 "no [*].safetensors file" convert-hf ${DENSE} ${MK_SOURCE_DIR}/docs ${WORKDIR}/c.safetensors)
