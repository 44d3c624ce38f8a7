#include "conform.h"
const conform_check_t conform_checks_handle[] = {
  {0},
};
