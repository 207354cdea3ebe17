#===- cmake/OmniSystemLibraries.cmake - the system libraries' targets -----===#
#
# omni_import_system_libraries(<missing-var> [GLOBAL]) defines the imported
# targets Omni::TurboJPEG (libjpeg-turbo's TurboJPEG API, Debian
# libturbojpeg0-dev), Omni::OpenBLAS (cblas.h and libopenblas, Debian
# libopenblas-dev: the cpu driver's f64 gemm), Omni::DNNL (oneDNN's C API,
# oneapi/dnnl/dnnl.h and libdnnl, Debian libdnnl-dev: the cpu driver's f32
# gemm) and Omni::CppHttplib (httplib.h and libcpp-httplib, Debian
# libcpp-httplib-dev) from a header and a library search, because none ships a CMake package on every
# distribution (Debian's dnnl-config.cmake even requires OpenCL headers). Both the build (top-level
# CMakeLists.txt, GLOBAL) and the installed omniConfig.cmake (for the link
# interfaces of the static runtime libraries) use it, so the two find the
# libraries the same way. Targets that already exist are kept. <missing-var>
# receives a list naming what was not found (empty when everything was); the
# caller decides whether that is fatal.
#
#===----------------------------------------------------------------------===#

function(omni_import_system_libraries missing_var)
  set(scope)
  if("GLOBAL" IN_LIST ARGN)
    set(scope GLOBAL)
  endif()
  set(missing)

  if(NOT TARGET Omni::TurboJPEG)
    find_path(TURBOJPEG_INCLUDE_DIR turbojpeg.h)
    find_library(TURBOJPEG_LIBRARY turbojpeg)
    if(TURBOJPEG_INCLUDE_DIR AND TURBOJPEG_LIBRARY)
      add_library(Omni::TurboJPEG UNKNOWN IMPORTED ${scope})
      set_target_properties(Omni::TurboJPEG PROPERTIES
        IMPORTED_LOCATION "${TURBOJPEG_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${TURBOJPEG_INCLUDE_DIR}")
    else()
      list(APPEND missing
        "TurboJPEG (turbojpeg.h / libturbojpeg; install libturbojpeg0-dev)")
    endif()
  endif()

  if(NOT TARGET Omni::OpenBLAS)
    find_path(OPENBLAS_CBLAS_INCLUDE_DIR cblas.h
      PATH_SUFFIXES openblas x86_64-linux-gnu)
    find_library(OPENBLAS_LIBRARY openblas)
    if(OPENBLAS_CBLAS_INCLUDE_DIR AND OPENBLAS_LIBRARY)
      add_library(Omni::OpenBLAS UNKNOWN IMPORTED ${scope})
      set_target_properties(Omni::OpenBLAS PROPERTIES
        IMPORTED_LOCATION "${OPENBLAS_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${OPENBLAS_CBLAS_INCLUDE_DIR}")
    else()
      list(APPEND missing
        "OpenBLAS (cblas.h / libopenblas; install libopenblas-dev)")
    endif()
  endif()

  if(NOT TARGET Omni::DNNL)
    find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
    find_library(DNNL_LIBRARY dnnl)
    if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
      add_library(Omni::DNNL UNKNOWN IMPORTED ${scope})
      set_target_properties(Omni::DNNL PROPERTIES
        IMPORTED_LOCATION "${DNNL_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
    else()
      list(APPEND missing
        "oneDNN (oneapi/dnnl/dnnl.h / libdnnl; install libdnnl-dev)")
    endif()
  endif()

  # cpp-httplib as Debian builds it (libcpp-httplib-dev): a shared library
  # compiled with OpenSSL, zlib and Brotli support, so its header must be
  # read with the same three macros (they change the classes' layout).
  if(NOT TARGET Omni::CppHttplib)
    find_path(CPPHTTPLIB_INCLUDE_DIR httplib.h)
    find_library(CPPHTTPLIB_LIBRARY cpp-httplib)
    if(CPPHTTPLIB_INCLUDE_DIR AND CPPHTTPLIB_LIBRARY)
      add_library(Omni::CppHttplib UNKNOWN IMPORTED ${scope})
      set_target_properties(Omni::CppHttplib PROPERTIES
        IMPORTED_LOCATION "${CPPHTTPLIB_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CPPHTTPLIB_INCLUDE_DIR}"
        INTERFACE_COMPILE_DEFINITIONS
          "CPPHTTPLIB_OPENSSL_SUPPORT;CPPHTTPLIB_ZLIB_SUPPORT;CPPHTTPLIB_BROTLI_SUPPORT")
    else()
      list(APPEND missing
        "cpp-httplib (httplib.h / libcpp-httplib; install libcpp-httplib-dev)")
    endif()
  endif()

  set(${missing_var} "${missing}" PARENT_SCOPE)
endfunction()
