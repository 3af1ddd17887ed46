// tessera-server's subcommands; each parses its own flags and returns the exit code.
#pragma once

namespace tessera::server {

int init_command(int argc, char** argv);
int task_command(int argc, char** argv);
int task_control_command(int argc, char** argv);  // task list|pause|resume|finish|weight
int run_command(int argc, char** argv);
int export_command(int argc, char** argv);
int status_command(int argc, char** argv);
int backup_command(int argc, char** argv);   // a state directory into a new folder
int restore_command(int argc, char** argv);  // a backup into a new state directory

}  // namespace tessera::server
