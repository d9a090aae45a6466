#pragma once
#include <ATen/core/Tensor.h>

at::Tensor relu_forward(at::Tensor x);
