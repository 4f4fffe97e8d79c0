/* commands.h — the subcommands of the deepmt binary; each gets argv from its own name on. */
#ifndef DEEPMT_CLI_COMMANDS_H
#define DEEPMT_CLI_COMMANDS_H

#define DEEPMT_VERSION "0.1.0"

int cmd_serve(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_probe(int argc, char **argv);

#endif
