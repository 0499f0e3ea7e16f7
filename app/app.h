/*
 * app.h: the vidtrain subcommands. Each lives in its own file (app/cmd_NAME.c, or
 * app/WING/cmd_NAME.c in a wing: train, eval, stream, prep) and is `int vt_cmd_NAME(int
 * argc, char **argv)` with argv[0] = the subcommand name; it prints its own --help and
 * returns the process exit code (0 ok, 1 failure, 2 usage error).
 */
#ifndef VT_APP_H
#define VT_APP_H

int vt_cmd_devices(int argc, char **argv);
int vt_cmd_synth(int argc, char **argv);
int vt_cmd_scan(int argc, char **argv);
int vt_cmd_plan(int argc, char **argv);
int vt_cmd_train(int argc, char **argv);
int vt_cmd_eval(int argc, char **argv);
int vt_cmd_predict(int argc, char **argv);
int vt_cmd_export(int argc, char **argv);
int vt_cmd_embed(int argc, char **argv);
int vt_cmd_bench(int argc, char **argv);
int vt_cmd_prep(int argc, char **argv);

/* 1 if argv holds -h or --help. */
int vt_wants_help(int argc, char **argv);

#endif
