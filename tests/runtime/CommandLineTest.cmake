# Runs one command line of a runtime tool that must be refused: exit status
# 2 and a message matching EXPECT, before any GPU is touched (so it runs on
# a machine without one). -DTOOL=path -DARGS="a;b" -DEXPECT=regex
execute_process(COMMAND ${TOOL} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "${TOOL} ${ARGS}: exit status ${rc}, expected 2\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "${TOOL} ${ARGS}: output does not match '${EXPECT}':\n${out}${err}")
endif()
