#include "conform.h"
const conform_check_t conform_checks_reg[] = {
  {0},
};
