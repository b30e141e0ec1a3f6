# gpustream_embed_dashboard(<target>): generates <binary dir>/generated/gpustream/
# dashboard_page.inc from the files in this folder (see embed.cmake) and lets <target> include
# it. transport/src/exposition/dashboard_assets.cpp includes it.
set(GPUSTREAM_WEB_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(gpustream_embed_dashboard target)
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/generated")
  set(_out "${_dir}/gpustream/dashboard_page.inc")
  set(_web "${GPUSTREAM_WEB_DIR}")
  file(GLOB _sources CONFIGURE_DEPENDS "${_web}/*.html" "${_web}/*.css" "${_web}/*.js")
  add_custom_command(OUTPUT "${_out}"
    COMMAND "${CMAKE_COMMAND}" "-DINPUT_DIR=${_web}" "-DOUTPUT=${_out}" -P "${_web}/embed.cmake"
    DEPENDS ${_sources} "${_web}/embed.cmake"
    COMMENT "Embedding the dashboard page (transport/web)"
    VERBATIM)
  target_sources(${target} PRIVATE "${_out}")
  target_include_directories(${target} PRIVATE "$<BUILD_INTERFACE:${_dir}>")
endfunction()
