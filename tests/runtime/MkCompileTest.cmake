# mk-compile end to end, without a GPU: a kernel mkc generates is compiled
# into an empty cache (one CUBIN, its full key printed), then found there
# under the same key; a directory without a manifest, and a cache that
# cannot be written, fail with status 1.
# -DMKC=path -DTOOL=path -DSPEC=spec.json -DWORK_DIR=dir
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/empty")
execute_process(COMMAND ${MKC} ${SPEC} --emit=cuda -o ${WORK_DIR}/kernel RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mkc failed (${rc}): ${err}")
endif()
function(run_compile expect_rc out_var)
  execute_process(COMMAND ${TOOL} --arch sm_90 --cache-dir ${WORK_DIR}/cache ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "mk-compile ${ARGN}: exit status ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()
run_compile(0 first ${WORK_DIR}/kernel)
if(NOT first MATCHES "compiled into ([0-9a-f]+) \\(")
  message(FATAL_ERROR "first run did not compile:\n${first}")
endif()
set(key "${CMAKE_MATCH_1}")
string(LENGTH "${key}" len)
file(GLOB cubins "${WORK_DIR}/cache/*.cubin")
if(NOT len EQUAL 64 OR NOT cubins STREQUAL "${WORK_DIR}/cache/${key}.cubin")
  message(FATAL_ERROR "expected one entry ${key}.cubin, found: ${cubins}\n${first}")
endif()
run_compile(0 second ${WORK_DIR}/kernel)
if(NOT second MATCHES "in the cache as ${key} \\(")
  message(FATAL_ERROR "second run did not find ${key} in the cache:\n${second}")
endif()
run_compile(1 bad ${WORK_DIR}/empty)
if(NOT bad MATCHES "mk-compile: .*empty: .*manifest")
  message(FATAL_ERROR "a directory without a manifest was not named:\n${bad}")
endif()
# A cache directory that cannot be made (under a regular file).
file(WRITE "${WORK_DIR}/not-a-dir" "")
execute_process(COMMAND ${TOOL} --arch sm_90 --cache-dir ${WORK_DIR}/not-a-dir/cache
                        ${WORK_DIR}/kernel
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT "${err}" MATCHES "not stored in the cache")
  message(FATAL_ERROR "an unwritable cache was not a failure (${rc}):\n${out}${err}")
endif()
