// Package tools is taskrt's model-facing surface: the task control tools
// (task_output, task_list, task_kill), the producer tools with run_in_background
// (bash, subagent), the completion-notice path into the owning agent's session, and
// the system-prompt section that teaches the background-task habit.
//
// Every string a model sees is part of a contract with the prompts written against
// it; golden tests pin them.
package tools
