# worker/: the reference all-reduce worker as real processes on loopback
# "nodes", its node check's pure parts, and the PyTorch DDP example (needs
# /usr/bin/python3 with torch).

ty_add_test(worker_nodecheck_unit unit/worker/test_nodecheck.c unit)
target_sources(test_worker_nodecheck_unit PRIVATE ${TY_SOURCE_DIR}/worker/nodecheck.c)
target_include_directories(test_worker_nodecheck_unit PRIVATE ${TY_SOURCE_DIR}/worker)

add_test(NAME worker_allreduce COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/allreduce_test.sh)
set_tests_properties(worker_allreduce PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>;TY_HAVE_NCCL=${TY_HAVE_NCCL}")

add_test(NAME worker_ddp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/ddp_test.sh)
set_tests_properties(worker_ddp PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_WORKER_EXAMPLES=${TY_SOURCE_DIR}/worker/examples")

add_test(NAME worker_nodecheck COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nodecheck_test.sh)
set_tests_properties(worker_nodecheck PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>")

# a real slow link: network namespaces, a bridge and tc tbf (root, like e2e_netns)
add_test(NAME worker_nodecheck_netns COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nodecheck_netns.sh)
set_tests_properties(worker_nodecheck_netns PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>")

# the trial metrics client (standard library only) against a scripted local HTTP server
add_test(NAME worker_metrics_client COMMAND /usr/bin/python3
  ${CMAKE_CURRENT_SOURCE_DIR}/worker/metrics_client_test.py)
set_tests_properties(worker_metrics_client PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT
  "TY_WORKER_EXAMPLES=${TY_SOURCE_DIR}/worker/examples")
