# Finds every dependency once and says clearly what is missing and how to get it.
set(MOEBENCH_SETUP_HINT "run scripts/setup.sh (Debian packages) or scripts/gpu_box.sh (private prefix)")

# ---- CUDA toolkit: cuBLAS, NCCL, NVTX3 ----
set(MOEBENCH_WITH_CUDA OFF)
if(NOT MOEBENCH_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    # libnccl.so.2 alone: the layout of the pip wheel (nvidia-nccl) that GPU images carry
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
    # CUDA 13 dropped sm_70 (V100); older toolkits still build it. Hopper gets sm_90a code (the
    # arch-specific features cuBLAS's and our kernels may use there) and compute_90 PTX, which
    # newer GPUs compile at load; sm_90a code itself runs on Hopper only.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      if(CUDAToolkit_VERSION_MAJOR GREATER_EQUAL 13)
        set(CMAKE_CUDA_ARCHITECTURES "80-real;90a-real;90-virtual")
      elseif(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.0)
        set(CMAKE_CUDA_ARCHITECTURES "70-real;80-real;90a-real;90-virtual")
      else()
        set(CMAKE_CUDA_ARCHITECTURES "70;80;90")
      endif()
    endif()
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no C++20 flag for nvcc 13
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    add_library(moebench_nccl INTERFACE)
    target_include_directories(moebench_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(moebench_nccl INTERFACE ${NCCL_LIBRARY})
    set(MOEBENCH_WITH_CUDA ON)
  elseif(MOEBENCH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MOEBENCH_CUDA=ON but the CUDA toolkit with cuBLAS and NCCL was not found "
                        "(toolkit: ${CUDAToolkit_FOUND}, NCCL: ${NCCL_LIBRARY}). Set CUDAToolkit_ROOT / NCCL_HOME, "
                        "or configure with -DMOEBENCH_CUDA=OFF.")
  endif()
endif()

# cuDNN 9 (the fused attention's engines): the toolkit's, CUDNN_HOME, or a Python wheel's
# (nvidia-cudnn-cu13, which scripts/gpu_box.sh points CUDNN_HOME at). Without it the fused
# attention is refused on CUDA with that reason; everything else builds.
set(MOEBENCH_WITH_CUDNN OFF)
if(MOEBENCH_WITH_CUDA)
  find_path(CUDNN_INCLUDE_DIR cudnn_graph.h HINTS ENV CUDNN_HOME ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ENV CUDNN_HOME ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    add_library(moebench_cudnn INTERFACE)
    target_include_directories(moebench_cudnn INTERFACE ${CUDNN_INCLUDE_DIR})
    target_link_libraries(moebench_cudnn INTERFACE ${CUDNN_LIBRARY})
    set(MOEBENCH_WITH_CUDNN ON)
  endif()
endif()

# CUPTI's headers for the kernel log (runtime/kernel_log.h); its library is loaded at run time
# (this one first), so a machine without it runs everything but the log.
set(MOEBENCH_WITH_CUPTI OFF)
if(MOEBENCH_WITH_CUDA)
  find_path(CUPTI_INCLUDE_DIR cupti.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include)
  find_library(CUPTI_LIBRARY NAMES cupti HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/lib64)
  if(CUPTI_INCLUDE_DIR)
    set(MOEBENCH_WITH_CUPTI ON)
  endif()
endif()

# NVTX3 is header-only and ships with the toolkit; ranges still time without it.
set(MOEBENCH_WITH_NVTX OFF)
find_path(NVTX3_INCLUDE_DIR nvtx3/nvtx3.hpp HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
if(NVTX3_INCLUDE_DIR)
  set(MOEBENCH_WITH_NVTX ON)
endif()

# ---- MPI ----
set(MOEBENCH_WITH_MPI OFF)
if(NOT MOEBENCH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(MOEBENCH_WITH_MPI ON)
  elseif(MOEBENCH_MPI STREQUAL "ON")
    message(FATAL_ERROR "MOEBENCH_MPI=ON but MPI was not found: ${MOEBENCH_SETUP_HINT}")
  endif()
endif()

# ---- OpenBLAS (CPU GEMM) ----
# Debian's libopenblas.so is an alternatives link; the real files sit in openblas-pthread/.
find_path(OPENBLAS_INCLUDE_DIR cblas.h
  PATH_SUFFIXES include/x86_64-linux-gnu/openblas-pthread include/aarch64-linux-gnu/openblas-pthread
                x86_64-linux-gnu/openblas-pthread aarch64-linux-gnu/openblas-pthread openblas include)
find_library(OPENBLAS_LIBRARY NAMES openblas
  PATH_SUFFIXES lib/x86_64-linux-gnu/openblas-pthread lib/aarch64-linux-gnu/openblas-pthread
                x86_64-linux-gnu/openblas-pthread aarch64-linux-gnu/openblas-pthread)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS (cblas.h, libopenblas) not found: ${MOEBENCH_SETUP_HINT}")
endif()
add_library(moebench_openblas INTERFACE)
target_include_directories(moebench_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(moebench_openblas INTERFACE ${OPENBLAS_LIBRARY})

# ---- Google Benchmark, CLI11, fast-cpp-csv-parser, GoogleTest ----
find_package(Threads REQUIRED)
find_package(benchmark QUIET)
if(NOT benchmark_FOUND)
  message(FATAL_ERROR "Google Benchmark not found: ${MOEBENCH_SETUP_HINT}")
endif()
find_package(CLI11 QUIET)
if(NOT CLI11_FOUND)
  message(FATAL_ERROR "CLI11 not found: ${MOEBENCH_SETUP_HINT}")
endif()
find_path(FCCP_INCLUDE_DIR libfccp/csv.h)
if(NOT FCCP_INCLUDE_DIR)
  message(FATAL_ERROR "fast-cpp-csv-parser (libfccp/csv.h) not found: ${MOEBENCH_SETUP_HINT}")
endif()
if(MOEBENCH_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found: ${MOEBENCH_SETUP_HINT}")
  endif()
endif()
