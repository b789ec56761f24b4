// Command agentsim plays simulated agent sessions on a taskrt runtime: the built-in
// demo (`agentsim run`), scenario files (`agentsim run FILE`), and JSON-lines scripts
// of tool calls (`agentsim script FILE|-`), one JSON result per line.
//
// It exists so that people can watch the runtime work and so that tests and other
// programs can drive it as a black box. Run `agentsim -h` for the usage, and see
// agentsim/README.md for the scenario and script formats. It is a simulator: the
// agents' models are scripts, not real models.
package main
