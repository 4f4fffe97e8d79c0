/* cmd_serve.c — `deepmt serve`: flags and environment into a config, then the server
 * (server/server.h; docs/server.md). */
#include <stdio.h>

#include "cli/commands.h"
#include "server/server.h"

int cmd_serve(int argc, char **argv) {
    dmt_server_config cfg;
    char err[1024];
    dmt_server_config_default(&cfg);
    int rc = dmt_server_config_from_args(&cfg, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "deepmt serve: %s\n", err);
        dmt_server_config_clear(&cfg);
        return rc < 0 ? 2 : 0;
    }
    rc = dmt_server_run(&cfg);
    dmt_server_config_clear(&cfg);
    return rc;
}
