// llama.cpp projector files. mtmd's clip_model_loader (tools/mtmd/clip.cpp) creates every tensor
// of the file in one ggml context, allocates one backend buffer for them
// (ggml_backend_alloc_ctx_tensors_from_buft on the GPU backend unless --no-mmproj-offload) and
// reads each tensor's ggml_nbytes into it: the GPU holds exactly the tensors' bytes.

#include "vramfit/spec/mmproj.hpp"

#include <fmt/format.h>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"

namespace vramfit::spec {

Mmproj mmproj_from_gguf(const GgufHeader& h, std::string_view origin, std::string_view field) {
  const GgufValue* arch = h.find("general.architecture");
  const std::string name = arch != nullptr && arch->type == GgufType::string ? arch->str : std::string();
  if (name != "clip")
    throw InputError(std::string(field),
                     fmt::format("{} is not a multimodal projector: its general.architecture is {}", origin,
                                 name.empty() ? std::string("missing") : "'" + name + "'"),
                     "give the mmproj-*.gguf file published beside the model (general.architecture 'clip'), or "
                     "drop --mmproj");
  if (h.tensors.empty())
    throw InputError(std::string(field), fmt::format("{} holds no tensors", origin),
                     "give the mmproj-*.gguf file published beside the model");
  Mmproj m;
  m.file = std::string(origin);
  for (const GgufTensor& t : h.tensors) m.bytes = checked_add(m.bytes, t.bytes, "mmproj bytes");
  m.tensors = h.tensors.size();
  if (const GgufValue* p = h.find("clip.projector_type"); p != nullptr && p->type == GgufType::string)
    m.projector_type = p->str;
  return m;
}

bool is_mmproj_name(const std::filesystem::path& p) {
  const std::string n = lower(p.filename().string());
  return n.size() > 5 && n.rfind("mmproj", 0) == 0 && n.substr(n.size() - 5) == ".gguf";
}

}  // namespace vramfit::spec
