# Generated documentation stays current.
add_test(NAME docs_configuration
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/docs_test.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(docs_configuration PROPERTIES LABELS unit TIMEOUT 60)
