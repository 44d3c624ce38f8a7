#include "conform.h"
const conform_check_t conform_checks_lifecycle[] = {
  {0},
};
