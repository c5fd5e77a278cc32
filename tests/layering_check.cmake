# The layering a second backend relies on: ops/, core/, autograd/, nn/ and optim/ name kernels only
# through the backend-neutral headers (src/terra/backend/*_kernels.h), never a backend's own folder
# (backend/cpu/...). Run by ctest: cmake -DSRC=<repo>/src/terra -P tests/layering_check.cmake
set(bad "")
foreach(layer ops core autograd nn optim)
  file(GLOB_RECURSE files "${SRC}/${layer}/*.cpp" "${SRC}/${layer}/*.h")
  foreach(f ${files})
    file(STRINGS "${f}" hits REGEX "#include \"terra/backend/[^/\"]+/")
    foreach(h ${hits})
      file(RELATIVE_PATH rel "${SRC}" "${f}")
      list(APPEND bad "${rel}: ${h}")
    endforeach()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " msg)
  message(FATAL_ERROR "these files include a backend folder's header (use backend/*_kernels.h):\n  ${msg}")
endif()
message(STATUS "layering: ops/, core/, autograd/, nn/, optim/ include no backend folder")
