package subagent

// Map is outcomeOf, for the external tests.
var Map = outcomeOf
