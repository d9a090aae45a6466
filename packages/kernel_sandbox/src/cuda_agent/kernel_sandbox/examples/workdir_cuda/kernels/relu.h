#pragma once
#include <torch/types.h>

torch::Tensor relu_forward(torch::Tensor x);
