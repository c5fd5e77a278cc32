// terra: the public C++ API (see API.md). One include for everything.
#pragma once
#include "terra/autograd/grad_mode.h"
#include "terra/core/allocator.h"
#include "terra/core/dispatch.h"
#include "terra/core/dtype.h"
#include "terra/core/random.h"
#include "terra/core/shape.h"
#include "terra/core/tensor.h"
#include "terra/core/threads.h"
#include "terra/ops/all.h"
#include "terra/runtime/engine.h"
#include "terra/nn.h"
#include "terra/optim.h"
