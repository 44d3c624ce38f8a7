/* Strand — the whole NCCL plugin ABI: net/CollNet v6..v12, tuner v2..v6, GIN v11..v14, RMA v13..v14. */
#ifndef STRAND_ABI_ABI_H
#define STRAND_ABI_ABI_H
#include "strand/abi/types.h"
#include "strand/abi/device.h"
#include "strand/abi/props.h"
#include "strand/abi/net.h"
#include "strand/abi/collnet.h"
#include "strand/abi/tuner.h"
#include "strand/abi/gin.h"
#include "strand/abi/rma.h"
#endif
