#include "vramfit/engine/optimizers.hpp"

#include <array>

namespace vramfit::engine {

namespace {
using spec::Optimizer;

// One row per optimizer. State sizes come from what each implementation allocates in its
// lazy state init; temporaries from the tensors its step() creates. Sources: PyTorch
// torch/optim/adamw.py and adam.py (_multi_tensor_adam: `exp_avg_sq_sqrt =
// torch._foreach_sqrt(exp_avg_sqs)` is one temporary the size of all parameters;
// _single_tensor_adam: `(exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)` holds two
// temporaries of one parameter), sgd.py (momentum_buffer = clone(grad); in-place foreach
// updates), adafactor.py (row/col variances for matrices), bitsandbytes AdamW8bit (two uint8
// states + one fp32 absmax per 2048-value block), lion-pytorch (exp_avg; per-parameter
// update = exp_avg.clone()...), bitsandbytes paged optimizers (Optimizer8bit/
// Optimizer2State with is_paged=True: states from get_paged(), cudaMallocManaged; 32-bit
// optimizers keep fp32 states for 16-bit parameters). Verified on the H200 truth: llama-3.1-8b bf16 AdamW's step
// adds exactly one parameter-sized bf16 temporary (15317 MiB); fused AdamW adds ~0.
constexpr std::array<OptimizerTraits, 11> kOptimizers{{
    // AdamW, default foreach implementation: exp_avg + exp_avg_sq in the parameter dtype.
    {Optimizer::adamw, 2, 0, 0, false, false, StepTemp::all_params, "AdamW (foreach): 2 states, 1 parameter-sized temporary"},
    // AdamW(fused=True): one CUDA kernel per tensor list, no temporaries.
    {Optimizer::adamw_fused, 2, 0, 0, false, false, StepTemp::none, "AdamW (fused): 2 states, no temporaries"},
    // AdamW(foreach=False): per-parameter loop, sqrt and div temporaries of one parameter.
    {Optimizer::adamw_forloop, 2, 0, 0, false, false, StepTemp::per_param_x2, "AdamW (for-loop): 2 states, 2 temporaries of the largest parameter"},
    // Adam: same state and kernels as AdamW.
    {Optimizer::adam, 2, 0, 0, false, false, StepTemp::all_params, "Adam (foreach): 2 states, 1 parameter-sized temporary"},
    // SGD without momentum: stateless, in-place update.
    {Optimizer::sgd, 0, 0, 0, false, false, StepTemp::none, "SGD: no state"},
    // SGD with momentum: one momentum buffer per parameter.
    {Optimizer::sgd_momentum, 1, 0, 0, false, false, StepTemp::none, "SGD with momentum: 1 state"},
    // torch.optim.Adafactor: factored second moment (rows + columns) for matrices, full
    // for vectors; its step squares the gradient (one temporary of the largest parameter).
    {Optimizer::adafactor, 0, 0, 0, true, false, StepTemp::largest_param_x2, "Adafactor: factored second moments"},
    // bitsandbytes AdamW8bit: two uint8 states; absmax per block counted in engine.
    {Optimizer::adamw_8bit, 0, 2, 0, false, false, StepTemp::none, "AdamW 8-bit (bitsandbytes): 2 one-byte states"},
    // Lion: one momentum state; per-parameter update temporaries.
    {Optimizer::lion, 1, 0, 0, false, false, StepTemp::largest_param_x2, "Lion: 1 state"},
    // bitsandbytes PagedAdamW (optim_bits=32): two fp32 states in paged (unified) memory; one
    // fused kernel per parameter, no temporaries.
    {Optimizer::paged_adamw, 0, 0, 8, false, true, StepTemp::none, "paged AdamW (bitsandbytes): 2 fp32 states in unified memory"},
    // bitsandbytes PagedAdamW8bit: AdamW8bit's states, paged.
    {Optimizer::paged_adamw_8bit, 0, 2, 0, false, true, StepTemp::none, "paged AdamW 8-bit (bitsandbytes): 2 one-byte states in unified memory"},
}};
static_assert(kOptimizers.size() == spec::kOptimizerCount, "kOptimizers: one row per spec::Optimizer");
static_assert([] {
  for (std::size_t i = 0; i < kOptimizers.size(); ++i)
    if (static_cast<std::size_t>(kOptimizers[i].id) != i) return false;
  return true;
}(), "kOptimizers: rows in spec::Optimizer's order");

}  // namespace

const OptimizerTraits& traits(spec::Optimizer o) noexcept { return kOptimizers[static_cast<std::size_t>(o)]; }

}  // namespace vramfit::engine
