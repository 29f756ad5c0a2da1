/* cmd_distill.c: `speclab distill`, the options of `speclab train` plus --teacher and --objective
 * (parsed in cmd_train.c). */
int sl_train_cli(int argc, char **argv, int distill);

int sl_cmd_distill(int argc, char **argv) { return sl_train_cli(argc, argv, 1); }
