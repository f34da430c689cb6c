// The stored weights. Formats and their sources:
//  - bitsandbytes 4-bit (functional.py quantize_4bit, blocksize 64): 4-bit values packed in
//    uint8, an fp32 absmax per block and the 16-value code table; with double quantization
//    (compress_statistics) the absmax is stored in uint8 with an fp32 absmax per 256 blocks,
//    an fp32 offset and the 256-value dynamic code table.
//  - bitsandbytes LLM.int8 (Int8Params): int8 weight + SCB, one fp32 scale per output row.
//  - GPTQ (auto-gptq / gptqmodel QuantLinear): qweight int32 [in*bits/32, out], qzeros int32
//    [groups, out*bits/32], scales fp16 [groups, out], g_idx int32 [in].
//  - AWQ (autoawq WQLinear_GEMM): qweight int32 [in, out*bits/32], qzeros int32
//    [groups, out*bits/32], scales fp16 [groups, out].
//  - fp8 (e4m3, one byte): an fp32 scale per tensor, per output channel or per block
//    (transformers FineGrainedFP8: weight_scale_inv [ceil(out/128), ceil(in/128)]).
//  - mxfp4 (OCP MX, transformers Mxfp4 for gpt-oss): 16 bytes of 4-bit values + 1 byte of
//    shared exponent per 32 values.
//  - GGUF: llama.cpp's block types, per tensor as the file type's mix assigns them (spec/gguf).
#include "weights.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::detail {

namespace {

using spec::QuantMethod;

std::uint64_t div_up(std::uint64_t a, std::uint64_t b) { return a / b + (a % b ? 1 : 0); }

// One allocation of `bytes`, as the caching allocator counts it.
Bytes block(std::uint64_t bytes) { return Bytes{bytes}.round_up(kMinBlock); }

}  // namespace

bool skipped(const spec::Linear& l, const spec::Quantization& q) {
  return std::any_of(q.skip_modules.begin(), q.skip_modules.end(),
                     [&](const std::string& s) { return spec::lora_target_matches(s, l.name); });
}

Bytes quantized_linear_bytes(const spec::Linear& l, const spec::Quantization& q) {
  const std::uint64_t in = l.in_features;
  const std::uint64_t out = checked_mul(l.out_features, l.copies);  // output rows over all copies
  const std::uint64_t n = checked_mul(in, out);
  const Bytes bias = block(checked_mul(out, 2));
  Bytes b = l.bias ? bias : Bytes{};
  switch (q.method) {
    case QuantMethod::bnb_4bit: {
      const std::uint64_t blocks = div_up(n, 64);
      b += block(div_up(n, 2)) + block(16 * 4);  // packed values, the nf4/fp4 code table
      if (q.double_quant)
        b += block(blocks) + block(div_up(blocks, 256) * 4) + block(4) + block(256 * 4);
      else
        b += block(checked_mul(blocks, 4));
      return b;
    }
    case QuantMethod::bnb_8bit: return b + block(n) + block(checked_mul(out, 4));
    case QuantMethod::gptq:
    case QuantMethod::awq: {
      const std::uint64_t groups = q.group_size == 0 ? 1 : div_up(in, q.group_size);
      const std::uint64_t per_row = l.copies;  // the packed layouts are per copy of the module
      const std::uint64_t out1 = l.out_features;
      Bytes one;
      if (q.method == QuantMethod::gptq)
        one = block(checked_mul(div_up(checked_mul(in, q.bits), 32) * 4, out1)) + block(checked_mul(in, 4));
      else
        one = block(checked_mul(in, div_up(checked_mul(out1, q.bits), 32) * 4));
      one += block(checked_mul(groups, div_up(checked_mul(out1, q.bits), 32) * 4));  // qzeros
      one += block(checked_mul(checked_mul(groups, out1), 2));                         // fp16 scales
      return b + one * per_row;
    }
    case QuantMethod::fp8: {
      std::uint64_t scales = 1;
      if (q.fp8_block_rows == 1 && q.fp8_block_cols == 0) scales = out;
      if (q.fp8_block_rows > 1 || q.fp8_block_cols > 0)
        scales = checked_mul(div_up(out, std::max<std::uint64_t>(q.fp8_block_rows, 1)),
                             div_up(in, std::max<std::uint64_t>(q.fp8_block_cols, 1)));
      return b + block(n) + block(checked_mul(scales, 4));
    }
    case QuantMethod::mxfp4: {
      const std::uint64_t blocks = checked_mul(out, div_up(in, 32));
      return b + block(checked_mul(blocks, 16)) + block(blocks);
    }
    case QuantMethod::none:
    case QuantMethod::gguf: break;
  }
  return b + Bytes{checked_mul(n, 2)};
}

Bytes weight_bytes(const spec::ModelSpec& m, const spec::Workload& w, std::uint64_t param_bytes) {
  const spec::Quantization q = spec::scheme_of(w);
  if (q.method == QuantMethod::none) return Bytes{checked_mul(m.params, param_bytes)} + Bytes{m.buffer_bytes};
  // A pre-quantized checkpoint loaded as it is: its tensors' bytes are exact.
  if (spec::keeps_checkpoint_packing(m, w))
    return Bytes{*m.packed_weight_bytes} + Bytes{m.buffer_bytes};
  if (q.method == QuantMethod::gguf) return Bytes{spec::gguf_model_bytes(m, q.gguf_type)} + Bytes{m.buffer_bytes};

  // The decoder's linears are packed; embeddings, lm_head, norms and skipped modules stay
  // 16-bit (transformers' get_keys_to_not_convert keeps the output embedding).
  Bytes packed;
  std::uint64_t packed_params = 0;
  std::uint64_t shape_params = 0;
  for (const auto& g : m.layers)
    for (const auto& l : g.linears) {
      shape_params = checked_add(shape_params, checked_mul(l.params(), g.count));
      if (skipped(l, q)) continue;
      packed += quantized_linear_bytes(l, q) * g.count;
      packed_params = checked_add(packed_params, checked_mul(l.params(), g.count));
    }
  // A bare --params count only approximates its assumed shape: what it has beyond (or short
  // of) the shape's count is linear weights too, packed at the shape's bytes per parameter.
  if (m.source == "params" && packed_params > 0 && packed_params == shape_params) {
    const std::uint64_t others = m.params > 0 ? count_params(m) - shape_params : 0;
    const std::uint64_t linear = m.params > others ? m.params - others : 0;
    // The shape's packed bytes per parameter, applied to the whole count (an estimate anyway:
    // the shape is assumed), in long double so no product wraps.
    const long double scaled =
        static_cast<long double>(packed.value()) / static_cast<long double>(packed_params) * static_cast<long double>(linear);
    if (!(scaled < 18446744073709551615.0L))
      throw InputError("size", "the size overflows 64 bits (over 16 EiB)",
                       "use realistic sizes: parameters, batch and sequence length are far too large");
    return Bytes{m.buffer_bytes} + Bytes{static_cast<std::uint64_t>(std::round(scaled))} + Bytes{checked_mul(others, 2)};
  }
  const std::uint64_t rest = m.params > packed_params ? m.params - packed_params : 0;
  return Bytes{m.buffer_bytes} + packed + Bytes{checked_mul(rest, 2)};
}

Bytes dequant_buffer(const spec::ModelSpec& m) {
  std::uint64_t largest = 0;
  for (const auto& g : m.layers)
    for (const auto& l : g.linears) largest = std::max(largest, checked_mul(l.in_features, l.out_features));
  return Bytes{checked_mul(largest, 2)};
}

}  // namespace vramfit::engine::detail
