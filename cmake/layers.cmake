# The layers of src/ as static libraries, one per component, so the build enforces the map in
# docs/architecture.md. Each library compiles against a private include root of its own
# (build/layers/NAME) holding links to just the folders, or for the compute seam just the headers, its
# layer may see. An include of anything else fails to compile, transitively: a header that includes
# a forbidden one fails in every layer that reaches it. tests/layering states the same rules in
# words (direct includes); this makes the compiler check them.
#
# pagoda_layer(NAME SOURCES <entries under src/> SEES <entries under src/> LINKS <layer libraries>)
# An entry is a folder or a file. LINKS orders the static libraries for the linker.
set(PAGODA_LAYER_ROOT ${CMAKE_BINARY_DIR}/layers)
set(PAGODA_LAYER_TARGETS "")

function(pagoda_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;SEES;LINKS" ${ARGN})
  set(root ${PAGODA_LAYER_ROOT}/${name})
  file(REMOVE_RECURSE ${root})
  foreach(entry ${L_SEES})
    get_filename_component(parent ${root}/${entry} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${entry} ${root}/${entry} SYMBOLIC)
  endforeach()
  set(sources "")
  foreach(entry ${L_SOURCES})
    if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/src/${entry})
      file(GLOB_RECURSE found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${entry}/*.cpp)
      list(APPEND sources ${found})
    else()
      list(APPEND sources ${CMAKE_SOURCE_DIR}/src/${entry})
    endif()
  endforeach()
  add_library(pagoda_${name} STATIC ${sources})
  target_include_directories(pagoda_${name} PRIVATE ${root})
  target_link_libraries(pagoda_${name} PUBLIC ${L_LINKS} Threads::Threads fmt::fmt nlohmann_json::nlohmann_json)
  set(PAGODA_LAYER_TARGETS ${PAGODA_LAYER_TARGETS} pagoda_${name} PARENT_SCOPE)
  set(PAGODA_LAYER_SOURCES ${PAGODA_LAYER_SOURCES} ${sources} PARENT_SCOPE)
endfunction()

# What the layers above compute may see of src/model: the StepModel seam, its factory, the Batch and
# the tools' entry points (the same list as tests/layering/include_rules_test.cpp).
set(PAGODA_MODEL_PUBLIC
  model/batch.h model/step_model.h model/open_step_model.h model/kv_options.h model/sequence_runner.h
  model/calibration.h model/random_model.h model/config.h model/model_file.h model/system_fingerprint.h
  model/devices.h model/classifier_head.h model/op_times.h model/mrope_position.h)
set(PAGODA_BACKEND_API backend/backend.h backend/backend_resources.h backend/op_params.h backend/op.h backend/moe_routing.h backend/alibi.h backend/lora_layout.h backend/attention_span.h)
set(PAGODA_STORAGE core arch gguf hf kv quant)

pagoda_layer(core SOURCES core SEES core)
# One description per architecture (arch/arch_description.h): read by hf and model, so below both.
pagoda_layer(arch SOURCES arch SEES arch)
pagoda_layer(gguf SOURCES gguf SEES core gguf LINKS pagoda_core)
pagoda_layer(hf SOURCES hf SEES core arch gguf hf LINKS pagoda_gguf pagoda_arch)
pagoda_layer(tokenizer SOURCES tokenizer SEES core gguf tokenizer LINKS pagoda_gguf PkgConfig::PCRE2)
pagoda_layer(chat SOURCES chat SEES core chat LINKS pagoda_core)
pagoda_layer(grammar SOURCES grammar SEES core gguf tokenizer grammar LINKS pagoda_tokenizer)
pagoda_layer(kv SOURCES kv SEES core kv LINKS pagoda_core)
pagoda_layer(quant SOURCES quant SEES core arch gguf hf quant LINKS pagoda_hf)
pagoda_layer(lora SOURCES lora SEES core arch gguf hf quant lora LINKS pagoda_quant)
pagoda_layer(backend_api SOURCES backend/backend.cpp backend/moe_routing.cpp backend/op.cpp backend/attention_span.cpp
  SEES ${PAGODA_STORAGE} ${PAGODA_BACKEND_API} LINKS pagoda_kv pagoda_quant)
pagoda_layer(backend_cpu SOURCES backend/cpu
  SEES ${PAGODA_STORAGE} ${PAGODA_BACKEND_API} backend/cpu LINKS pagoda_backend_api)
pagoda_layer(backend_reference SOURCES backend/reference
  SEES ${PAGODA_STORAGE} ${PAGODA_BACKEND_API} backend/reference LINKS pagoda_backend_api)
set(backend_links pagoda_backend_cpu pagoda_backend_reference)
if(PAGODA_HAVE_VULKAN)
  pagoda_layer(backend_vulkan SOURCES backend/vulkan
    SEES ${PAGODA_STORAGE} ${PAGODA_BACKEND_API} backend/vulkan LINKS pagoda_backend_api ${CMAKE_DL_LIBS})
  list(APPEND backend_links pagoda_backend_vulkan)
endif()
pagoda_layer(backend SOURCES backend/registry.cpp SEES ${PAGODA_STORAGE} backend LINKS ${backend_links})
pagoda_layer(model SOURCES model SEES ${PAGODA_STORAGE} lora tokenizer backend model
  LINKS pagoda_backend pagoda_lora pagoda_tokenizer)
pagoda_layer(vision SOURCES vision SEES ${PAGODA_STORAGE} lora tokenizer backend model vision
  LINKS pagoda_model PNG::PNG JPEG::JPEG PkgConfig::WEBP)
pagoda_layer(engine SOURCES engine SEES ${PAGODA_STORAGE} lora tokenizer grammar engine ${PAGODA_MODEL_PUBLIC}
  LINKS pagoda_model pagoda_grammar)
pagoda_layer(tune SOURCES tune SEES ${PAGODA_STORAGE} lora tokenizer backend model tune LINKS pagoda_model)
pagoda_layer(server SOURCES server
  SEES ${PAGODA_STORAGE} lora tokenizer grammar chat engine server vision ${PAGODA_MODEL_PUBLIC}
  LINKS pagoda_engine pagoda_chat pagoda_vision Boost::headers OpenSSL::SSL OpenSSL::Crypto)
