// Include after <torch/torch.h> in torch tests: LibTorch's glog defines CHECK, CHECK_EQ and
// friends, which doctest needs for itself.
#pragma once

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LE
#undef CHECK_LT
#undef CHECK_GE
#undef CHECK_GT
#undef CHECK_NOTNULL
#include <doctest/doctest.h>
