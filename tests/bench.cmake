# The benchmarks' smoke tests (label e2e): each runs one benchmark --quick
# --no-build on this build's programs, then checks its JSON with
# `bench/report_lib.py check`: every figure present, or explicitly not
# measured (null with a reason, bench/README.md "Not measured"); never the
# speed, so a busy machine does not fail them.
# ty_bench_smoke(NAME SCRIPT): ctest NAME runs bench/SCRIPT into bench-NAME.json.
function(ty_bench_smoke name script)
  set(json ${CMAKE_BINARY_DIR}/${name}.json)
  add_test(NAME ${name}
           COMMAND bash -c "rm -f \"$3\" && bash \"$0\" --quick --no-build --build \"$1\" --json \"$3\" && /usr/bin/python3 \"$2\" check \"$3\""
                   ${PROJECT_SOURCE_DIR}/bench/${script} ${CMAKE_BINARY_DIR}
                   ${PROJECT_SOURCE_DIR}/bench/report_lib.py ${json})
  set_tests_properties(${name} PROPERTIES LABELS e2e TIMEOUT 300)
endfunction()

# bench/slurm/run: the Slurm side by side (about 30 s). Needs root and
# Debian's slurm-wlm, munge and libslurm-dev (tests/run installs them;
# without libslurm when CMake configured, trainyard-bench-slurm is not built
# and the test fails saying so).
ty_bench_smoke(bench_slurm slurm/run)
# bench/dispatch/run: 100 simulated nodes (trainyard-simexec), 500 gangs and
# 10 latency jobs on a private stack (about 40 s).
ty_bench_smoke(bench_dispatch dispatch/run)
# bench/latency/run: 10 real 2-node jobs one at a time (about 15 s).
ty_bench_smoke(bench_latency latency/run)
# bench/submit/run: API submissions against pgbench and GET /healthz with 1,
# 16 and 64 clients, 1 s each (about 20 s).
ty_bench_smoke(bench_submit submit/run)

# The reports fed empty and zero measurements (tests/bench/report_test.py):
# "not measured" lines and strict JSON, never a crash.
add_test(NAME bench_reports COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/bench/report_test.py)
set_tests_properties(bench_reports PROPERTIES LABELS unit TIMEOUT 60)
