# How ctest shares this machine's cores between tests.
#
# Integration tests start DPDK processes whose lcores poll (with an idle
# back-off): two of them side by side, or one beside a unit test, only slow
# each other down and stretch the recovery tests' timing bounds. They used
# to be RUN_SERIAL, which also kept the Tofino compiles (bf-p4c, minutes of
# one core, no DPDK) from running beside them while a core sat idle.
#
# Instead every test asks for slots of one ctest resource, "cores" (one
# slot per logical core): an integration test takes them all, a unit test
# one. The P4 compiles take none and run under `nice -n 19`, so they only
# use what the other tests leave idle. scripts/test.sh passes the spec:
#   ctest --resource-spec-file ${CMAKE_BINARY_DIR}/ctest-cores.json -j <cores + 2>
# Without the spec ctest ignores the slots; RESOURCE_LOCK still keeps the
# integration tests from running beside each other.
cmake_host_system_information(RESULT AGQ_TEST_CORES QUERY NUMBER_OF_LOGICAL_CORES)
if(NOT AGQ_TEST_CORES OR AGQ_TEST_CORES LESS 1)
  set(AGQ_TEST_CORES 1)
endif()
file(WRITE ${CMAKE_BINARY_DIR}/ctest-cores.json
  "{\"version\": {\"major\": 1, \"minor\": 0},\n \"local\": [{\"cores\": [{\"id\": \"0\", \"slots\": ${AGQ_TEST_CORES}}]}]}\n")
set(AGQ_TEST_ONE_CORE "cores:1")
set(AGQ_TEST_ALL_CORES "cores:${AGQ_TEST_CORES}")

# set_tests_properties for a test that runs DPDK processes: all the cores,
# and never beside another such test.
function(agq_test_takes_the_machine name)
  set_tests_properties(${name} PROPERTIES RESOURCE_GROUPS "${AGQ_TEST_ALL_CORES}"
                                          RESOURCE_LOCK agq_dpdk_processes)
endfunction()
