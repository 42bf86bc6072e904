# The dashboard's browser test (tests/browser/README.md): Node.js with
# playwright-core and axe-core from tests/browser/node_modules (tests/run
# runs npm ci there), Debian's chromium, the dashboard from portal/dist and
# the e2e stack. Named to sort after e2e.cmake, whose TY_E2E_ENV it uses.
add_test(NAME browser COMMAND node --test-reporter=spec ${CMAKE_CURRENT_SOURCE_DIR}/browser/dashboard.test.js)
set_tests_properties(browser PROPERTIES LABELS e2e TIMEOUT 600
  ENVIRONMENT "${TY_E2E_ENV};TY_STACK_BIN=$<TARGET_FILE:ty_e2e_stack>;TY_BROWSER_ARTIFACTS=${CMAKE_BINARY_DIR}/artifacts/browser")
