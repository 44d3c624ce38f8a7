#include "conform.h"
const conform_check_t conform_checks_limits[] = {
  {0},
};
