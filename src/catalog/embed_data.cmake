# Writes a C++ source holding every file of DATA_DIR (*.json) as a string, keyed by its
# path relative to DATA_DIR. Run at build time: cmake -DDATA_DIR=... -DOUT=... -P this.
file(GLOB_RECURSE files RELATIVE ${DATA_DIR} ${DATA_DIR}/*.json)
list(SORT files)
set(body "")
foreach(f ${files})
  file(READ ${DATA_DIR}/${f} text)
  string(FIND "${text}" ")vramfit_data\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${f} contains the raw-string delimiter )vramfit_data\"")
  endif()
  string(APPEND body "    {\"${f}\", R\"vramfit_data(${text})vramfit_data\"},\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from data/ by src/catalog/embed_data.cmake. Do not edit.
#include <map>
#include <string>

namespace vramfit::catalog {

const std::map<std::string, std::string>& embedded_files() {
  static const std::map<std::string, std::string> files{
${body}  };
  return files;
}

}  // namespace vramfit::catalog
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
