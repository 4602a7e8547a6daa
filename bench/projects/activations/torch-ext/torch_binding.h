#pragma once

#include <torch/torch.h>

void relu(torch::Tensor &out, torch::Tensor const &input);
void silu(torch::Tensor &out, torch::Tensor const &input);
