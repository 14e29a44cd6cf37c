# `cmake --install BUILD [--prefix P]`: coil as one relocatable prefix
#   bin/coil                      the command line
#   lib/libcoil_runtime.so        loads and runs packages (include/coil/coil.h, coil.hpp)
#   lib/libcoil_compiler.so       compiles models into packages (include/coil/compiler.h)
#   lib/libcoil_cuda.so           the CUDA half of the runtime (when built with CUDA)
#   include/coil/*.h              the public headers (generated code includes them too)
#   lib/cmake/coil/               coilConfig.cmake: targets coil::runtime, coil::compiler
#   lib/pkgconfig/                coil.pc (the runtime), coil-compiler.pc
# Every binary finds the libraries through an $ORIGIN-relative RPATH, and the compiler finds
# the headers and bin/coil beside itself (src/driver/Install.h), so the prefix can be moved.
# A wheel (pyproject.toml) installs this same prefix inside the Python package `coil`, with the
# module beside it (python/CMakeLists.txt).
include(CMakePackageConfigHelpers)

set(COIL_INSTALL_LIBDIR lib)
# Link directories outside the system's (OpenBLAS's openmp flavour, the CUDA toolkit's) stay in
# the installed RPATH after the $ORIGIN entries.
set_target_properties(coil PROPERTIES INSTALL_RPATH "$ORIGIN/../lib" INSTALL_RPATH_USE_LINK_PATH ON)
set(COIL_INSTALLED_LIBRARIES coil_runtime coil_compiler)
if(TARGET coil_cuda)
  list(APPEND COIL_INSTALLED_LIBRARIES coil_cuda)
endif()
set_target_properties(${COIL_INSTALLED_LIBRARIES} PROPERTIES INSTALL_RPATH "$ORIGIN"
  INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS coil RUNTIME DESTINATION bin COMPONENT coil)
install(TARGETS ${COIL_INSTALLED_LIBRARIES} LIBRARY DESTINATION ${COIL_INSTALL_LIBDIR} COMPONENT coil)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/coil DESTINATION include COMPONENT coil
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

configure_file(${PROJECT_SOURCE_DIR}/cmake/coilConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/coilConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/coilConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/coilConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/coilConfigVersion.cmake
  DESTINATION ${COIL_INSTALL_LIBDIR}/cmake/coil COMPONENT coil)

foreach(pc coil coil-compiler)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/cmake/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cmake/${pc}.pc DESTINATION ${COIL_INSTALL_LIBDIR}/pkgconfig
    COMPONENT coil)
endforeach()
