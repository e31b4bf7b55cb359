# The standard-library headers (and, in the tests, GoogleTest's) that nearly every C++ file
# includes, parsed once into a precompiled header instead of once per file, where parsing them
# was a large share of a typical file's compile time. A target either builds one
# (moebench_precompile_headers) or uses another's built with the same flags
# (moebench_reuse_precompiled_headers). MOEBENCH_PCH=OFF builds every file on its own headers
# alone, which shows an include a file forgot.
option(MOEBENCH_PCH "Precompile the standard headers most C++ files include" ON)

set(MOEBENCH_PCH_STD_HEADERS
    <algorithm> <array> <atomic> <chrono> <cmath> <cstddef> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem>
    <fstream> <functional> <map> <memory> <mutex> <optional> <sstream> <string> <thread> <utility> <vector>)

# C++ files only: the CUDA files of moebench_kernels go through nvcc, which takes none.
function(moebench_precompile_headers target)
  if(NOT MOEBENCH_PCH)
    return()
  endif()
  set(headers ${MOEBENCH_PCH_STD_HEADERS} ${ARGN})
  list(TRANSFORM headers PREPEND "$<$<COMPILE_LANGUAGE:CXX>:")
  list(TRANSFORM headers APPEND ">")
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# moebench_reuse_precompiled_headers(OWNER TARGET...): each target's C++ files use OWNER's.
function(moebench_reuse_precompiled_headers owner)
  if(MOEBENCH_PCH)
    foreach(target IN LISTS ARGN)
      target_precompile_headers(${target} REUSE_FROM ${owner})
    endforeach()
  endif()
endfunction()
