// Package demo hands the built-in demo scenario to the agentsim command, which plays
// it for `agentsim run` without a file.
//
// The scenario is agentsim/scenarios/demo.json, next to the other example scenarios
// the tests play. go:embed reaches no parent directory, so only package agentsim can
// embed it; it stores the file here when it is initialised, and a program that
// imports package agentsim finds it in JSON. The demo belongs to the command, not to
// agentsim's API: that is why it lives under internal/.
package demo

// JSON is the demo scenario file, set by package agentsim's init; parse it with
// agentsim.ParseScenario.
var JSON []byte
