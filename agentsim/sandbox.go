package agentsim

// sandbox says how the Sim's bash producer sandboxes commands: "off", or the
// sandbox ("workspace-write", "read-only, network", …) with how it runs or why it
// cannot (then every command fails to start).
func (s *Sim) sandbox() string {
	sb := s.bash.Sandbox()
	if !sb.On() {
		return "off"
	}
	return sb.String() + " (" + s.bash.SandboxDetail() + ")"
}
