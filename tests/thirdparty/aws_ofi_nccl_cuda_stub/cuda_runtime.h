/* Strand's stand-in (see cuda.h here). */
#include "cuda_runtime_api.h"
