#include <torch/csrc/utils/pybind.h>

#include "relu.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_forward", &relu_forward, "ReLU (CPU)");
}
