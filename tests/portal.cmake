# portal/: the dashboard's typecheck and the unit tests of its pure helpers
# (formatting, CSV, cursor paging, routes; vitest under node), in portal/
# with the node_modules that tests/run installs (portal/build).
add_test(NAME portal_unit COMMAND npm test --prefix ${PROJECT_SOURCE_DIR}/portal)
add_test(NAME portal_typecheck COMMAND npm run typecheck --prefix ${PROJECT_SOURCE_DIR}/portal)
set_tests_properties(portal_unit portal_typecheck PROPERTIES LABELS unit TIMEOUT 120)
