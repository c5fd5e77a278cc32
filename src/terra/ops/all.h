// Every op's free function. Each op group adds its header here.
#pragma once
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/linalg.h"
#include "terra/ops/reduce.h"
#include "terra/ops/views.h"
#include "terra/ops/conv.h"
#include "terra/ops/linear.h"
#include "terra/ops/norm.h"
#include "terra/ops/pool.h"
