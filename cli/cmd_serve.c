#include <stdio.h>
#include "cli/commands.h"
int cmd_serve(int argc, char **argv) { fprintf(stderr, "deepmt serve: not built yet\n"); return 1; }
