#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

// Only the schema: the kernel registers its CPU implementation itself.
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor! out, Tensor input) -> ()");
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
