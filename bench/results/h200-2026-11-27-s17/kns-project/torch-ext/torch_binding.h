#pragma once

// The op `relu(out, input)`: out = max(input, 0), elementwise; float32, contiguous, same shape.
