# worker/: the reference all-reduce worker as real processes on loopback
# "nodes", and the PyTorch DDP example (needs /usr/bin/python3 with torch).

add_test(NAME worker_allreduce COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/allreduce_test.sh)
set_tests_properties(worker_allreduce PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>;TY_HAVE_NCCL=${TY_HAVE_NCCL}")

add_test(NAME worker_ddp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/ddp_test.sh)
set_tests_properties(worker_ddp PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_WORKER_EXAMPLES=${TY_SOURCE_DIR}/worker/examples")

add_test(NAME worker_nodecheck COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nodecheck_test.sh)
set_tests_properties(worker_nodecheck PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>")
