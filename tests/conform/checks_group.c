#include "conform.h"
const conform_check_t conform_checks_group[] = {
  {0},
};
