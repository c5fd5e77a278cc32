// terra::optim: optimizers.
#pragma once
#include "terra/optim/adam.h"
#include "terra/optim/optimizer.h"
#include "terra/optim/sgd.h"
