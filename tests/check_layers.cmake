# cmake -DRNNJIT_SOURCE_DIR=... -P tests/check_layers.cmake: fails (naming the file and the line)
# where a layer includes what sits above it (CMakeLists.txt, "The library, in layers"):
#   the plan and the planner (codegen/, codegen/planner/) and the CUDA target's source generators
#   (codegen/cuda/) include no emitter (codegen/x64/), no Xbyak and nothing of runtime/ but the
#   public API (runtime/include/rnnjit/);
#   the emitters (codegen/x64/) and the reference kernels (kernels/) include nothing of runtime/;
#   the ONNX Runtime library (onnxruntime/) includes only the public API.
# Xbyak's headers are system headers, so no include path of a target can keep them out.
set(root ${RNNJIT_SOURCE_DIR})
set(failures "")
function(check_layer pattern forbidden why)
  file(GLOB files ${root}/${pattern})
  foreach(file ${files})
    file(STRINGS ${file} lines REGEX "^#include")
    foreach(line ${lines})
      if(line MATCHES "${forbidden}")
        file(RELATIVE_PATH rel ${root} ${file})
        set(failures "${failures}\n  ${rel}: ${line} (${why})")
      endif()
    endforeach()
  endforeach()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
set(above_plan "codegen/x64/|xbyak|Zydis|\"runtime/")
foreach(dir codegen codegen/planner codegen/cuda)
  check_layer("${dir}/*.[ch]pp" "${above_plan}" "the planner and the plan sit below the emitters and the runtime")
endforeach()
check_layer("codegen/x64/*.[ch]pp" "\"runtime/" "the emitters sit below the runtime")
check_layer("kernels/*.[ch]pp" "\"runtime/|codegen/x64/|xbyak" "the reference kernels sit below the emitters and the runtime")
# The adapters sit over the public API (rnnjit.h, rnnjit/*.hpp): the ONNX Runtime library.
check_layer("onnxruntime/*.[ch]pp" "\"runtime/|\"codegen/|\"kernels/|xbyak"
            "the ONNX Runtime library is an adapter over the public API")
if(failures)
  message(FATAL_ERROR "layering: an include reaches up a layer:${failures}")
endif()
message(STATUS "layering: every include stays within its layer or below")
