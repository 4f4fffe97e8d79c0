#include <stdio.h>
#include "cli/commands.h"
int cmd_translate(int argc, char **argv) { fprintf(stderr, "deepmt translate: not built yet\n"); return 1; }
