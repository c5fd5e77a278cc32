// terra::nn: modules, layers, initialization and the functional forms.
#pragma once
#include "terra/nn/activation.h"
#include "terra/nn/attention.h"
#include "terra/nn/container.h"
#include "terra/nn/conv.h"
#include "terra/nn/dropout.h"
#include "terra/nn/embedding.h"
#include "terra/nn/functional.h"
#include "terra/nn/init.h"
#include "terra/nn/linear.h"
#include "terra/nn/module.h"
#include "terra/nn/norm.h"
#include "terra/nn/pool.h"
